package registrytest

import (
	"net/http"
	"testing"
)

func TestStartStop(t *testing.T) {
	r := Start(t)
	tags, err := r.Tags("nothing/here")
	if err != nil || len(tags) != 0 {
		t.Fatalf("Tags(nothing/here) = %v, %v; want none", tags, err)
	}
	client, err := r.client()
	if err != nil {
		t.Fatal(err)
	}
	r.Stop()
	if _, err := client.Get("https://" + r.Host + "/v2/"); err == nil {
		t.Fatalf("the registry still answers after Stop")
	}
	r.Start()
	resp, err := client.Get("https://" + r.Host + "/v2/")
	if err != nil {
		t.Fatalf("after a restart: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v2/ without credentials = %s, want 401", resp.Status)
	}
}
