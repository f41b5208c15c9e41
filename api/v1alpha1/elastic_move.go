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

package v1alpha1

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// An elastic gang's grow whose added workers have no room in the topology domain its running
// workers hold may move whole: convoy-scheduler's placement admission check books the whole gang,
// at its grown size, where it fits with the running workers' GPUs counted free, and says so in the
// message it sets on the grow's Workload slice (ElasticMoveMessage). The operator reads that
// message, has the running attempt checkpoint, and restarts the whole gang at the grown size; the
// scheduler places it on the booking.

// ElasticMoveMessage is the part of the placement check's message that says attempt (the running
// pods' LabelRestartAttempt) of the gang moves whole to the place booked, and why (the reason the
// added workers do not fit beside the running ones).
func ElasticMoveMessage(attempt int32, why string) string {
	return fmt.Sprintf("; attempt %d of the gang moves there whole, %s%s", attempt, elasticMoveWhy, why)
}

const elasticMoveWhy = "for the workers it adds have no room beside its running ones: "

var elasticMoveAttempt = regexp.MustCompile(`; attempt (\d+) of the gang moves there whole, `)

// ElasticMoveReason returns the why of the move a placement check's message (ElasticMoveMessage)
// names, empty when it names none.
func ElasticMoveReason(message string) string {
	loc := elasticMoveAttempt.FindStringIndex(message)
	if loc == nil {
		return ""
	}
	_, why, _ := strings.Cut(message[loc[1]:], elasticMoveWhy)
	return why
}

// ElasticMoveAttempt returns the attempt a placement check's message (ElasticMoveMessage) moves;
// ok is false when the message moves none.
func ElasticMoveAttempt(message string) (attempt int32, ok bool) {
	m := elasticMoveAttempt.FindStringSubmatch(message)
	if m == nil {
		return 0, false
	}
	n, err := strconv.ParseInt(m[1], 10, 32)
	return int32(n), err == nil
}
