// Command kstatus prints the status sigs.k8s.io/cli-utils' kstatus library computes for one
// object: what Flux (kustomize-controller's `wait: true` and healthChecks), `kubectl wait`-like
// tools built on kstatus and cli-utils' applier conclude about our resources.
//
// Usage: kstatus < object.json   ->   {"status": "Current", "message": "..."}
// (status: InProgress, Failed, Current, Terminating, NotFound or Unknown, as kstatus names them)
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

func main() {
	raw, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail(err)
	}
	u := &unstructured.Unstructured{}
	// The apimachinery decoding, as a client reading from the apiserver gets the object.
	if err := u.UnmarshalJSON(raw); err != nil {
		fail(err)
	}
	res, err := status.Compute(u)
	if err != nil {
		fail(err)
	}
	out, _ := json.Marshal(map[string]string{"status": res.Status.String(), "message": res.Message})
	fmt.Println(string(out))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "kstatus:", err)
	os.Exit(1)
}
