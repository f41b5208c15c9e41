/*
Copyright The Convoy Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package progress

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// podClaims are what a pod-bound ServiceAccount token says of itself, read without verifying its
// signature. They only refuse a request early, before a TokenReview; a request is accepted only
// once the API server has reviewed the token and its reviewed user names the same pod.
type podClaims struct {
	Namespace string
	Pod       string
	PodUID    string
}

// jwtPayload is the part of a projected ServiceAccount token's claims the early checks read.
type jwtPayload struct {
	Audience   json.RawMessage `json:"aud"`
	Kubernetes *struct {
		Namespace string `json:"namespace"`
		Pod       *struct {
			Name string `json:"name"`
			UID  string `json:"uid"`
		} `json:"pod"`
	} `json:"kubernetes.io"`
}

const sendTheProjectedToken = "send the projected token in $CONVOY_PROGRESS_TOKEN_FILE"

// unverifiedClaims returns the claims of a projected ServiceAccount token for Audience bound to a
// pod, or an error saying why token cannot be one: it is not a JWT, has no kubernetes.io claim, is
// for another audience or is bound to no pod.
func unverifiedClaims(token string) (podClaims, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return podClaims{}, errors.New("the bearer token is not a JWT: " + sendTheProjectedToken)
	}
	var header map[string]any
	var payload jwtPayload
	if err := decodeSegment(parts[0], &header); err != nil {
		return podClaims{}, fmt.Errorf("the bearer token's JWT header %v: %s", err, sendTheProjectedToken)
	}
	if err := decodeSegment(parts[1], &payload); err != nil {
		return podClaims{}, fmt.Errorf("the bearer token's JWT claims %v: %s", err, sendTheProjectedToken)
	}
	k := payload.Kubernetes
	if k == nil || k.Namespace == "" {
		return podClaims{}, errors.New("the bearer token has no kubernetes.io claim naming a namespace, so it is no ServiceAccount token: " + sendTheProjectedToken)
	}
	if !hasAudience(payload.Audience, Audience) {
		return podClaims{}, fmt.Errorf("the token is not for audience %s: %s", Audience, sendTheProjectedToken)
	}
	if k.Pod == nil || k.Pod.Name == "" || k.Pod.UID == "" {
		return podClaims{}, errors.New("the token is not bound to a pod: " + sendTheProjectedToken)
	}
	return podClaims{Namespace: k.Namespace, Pod: k.Pod.Name, PodUID: k.Pod.UID}, nil
}

func decodeSegment(segment string, into any) error {
	raw, err := base64.RawURLEncoding.DecodeString(segment)
	if err != nil {
		return errors.New("is not base64url")
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return errors.New("is not a JSON object")
	}
	return nil
}

// hasAudience reports whether the aud claim, a string or a list of strings, holds want.
func hasAudience(aud json.RawMessage, want string) bool {
	var one string
	if json.Unmarshal(aud, &one) == nil {
		return one == want
	}
	var many []string
	return json.Unmarshal(aud, &many) == nil && slices.Contains(many, want)
}
