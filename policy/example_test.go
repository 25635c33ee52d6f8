package policy_test

import (
	"fmt"

	"github.com/sluice-rl/sluice/policy"
)

func ExampleParse() {
	s, err := policy.Parse([]byte(`
defaults:
  on_store_error: local
policies:
  - name: login
    match: "login:*"
    limit: 5
    rate: 5
    period: 1m
    on_store_error: closed
  - name: api
    match: "*"
    limit: 100
    rate: 50
`), "sluice.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(s.Match("login:alice").Name, s.Match("api:orders").Name)
	fmt.Println(s)
	// Output:
	// login api
	// sluice.yaml: 2 policies, first match wins, store timeout 50ms
	//   login match="login:*" token_bucket limit=5 rate=5/1m on_store_error=closed local_share=1 hot=off
	//   api match="*" token_bucket limit=100 rate=50/1s on_store_error=local local_share=1 hot=lease(threshold=500/s) (default)
}

func ExampleParse_error() {
	_, err := policy.Parse([]byte(`
policies:
  - name: login
    match: "login:*"
    limit: 5
    rate: 5
  - name: api
    match: "*"
    limit: -5
    rate: 50
    on_store_error: open
`), "sluice.yaml")
	fmt.Println(err)
	// Output:
	// sluice.yaml:3: policy #1 "login": on_store_error: required (open | closed | local), set it here or in defaults
	// sluice.yaml:9: policy #2 "api": limit: must be a positive integer, got -5
}
