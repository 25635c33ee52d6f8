package localredis_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/sluice-rl/sluice/internal/localredis"
)

// A failover drill: find the primary of a key, crash it, and wait for one
// of its replicas to take over. In a test, NewCluster(t, cfg) replaces Start
// and the deferred Stop.
func ExampleStart() {
	ctx := context.Background()
	c, err := localredis.Start(ctx, localredis.Config{NodeTimeout: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Stop()

	old, err := c.PrimaryForKey(ctx, "sluice:{user42}")
	if err != nil {
		log.Fatal(err)
	}
	if err := old.Kill(); err != nil {
		log.Fatal(err)
	}
	promoted, err := c.WaitNewPrimary(ctx, old)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(promoted.Addr, "now owns slot", localredis.Slot("sluice:{user42}"))
}
