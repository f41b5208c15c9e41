package gangcore

import (
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var metav1CreateOptions = metav1.CreateOptions{}

func itoa(i int) string { return strconv.Itoa(i) }

func resourceMust(s string) resource.Quantity { return resource.MustParse(s) }
