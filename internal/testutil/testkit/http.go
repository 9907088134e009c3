package testkit

import (
	"io"
	"net/http"
	"testing"
)

// Fetch sends req with the default client and returns the response (its
// body already read and closed) and the body; a transport error fails the
// test.
func Fetch(t testing.TB, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}
