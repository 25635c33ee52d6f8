package bench

import (
	"context"
	"fmt"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func init() { dialers[DoorGRPC] = dialGRPC }

// grpcCaller is Envoy's ShouldRateLimit with one descriptor, domain
// "bench" and the entry key=<key>, on a connection of its own: sluice's
// catch-all policy matches the descriptor's key ("bench:key=…").
type grpcCaller struct {
	conn *grpc.ClientConn
	c    rlsv3.RateLimitServiceClient
}

func dialGRPC(addr string) (caller, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	return grpcCaller{conn: conn, c: rlsv3.NewRateLimitServiceClient(conn)}, nil
}

func (g grpcCaller) take(ctx context.Context, key string) error {
	resp, err := g.c.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "bench", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "key", Value: key}}},
	}})
	if err != nil {
		return err
	}
	if len(resp.GetStatuses()) != 1 || resp.GetStatuses()[0].GetCurrentLimit() == nil {
		return fmt.Errorf("ShouldRateLimit: %v: want one status with a limit", resp)
	}
	return nil
}

func (g grpcCaller) close() { _ = g.conn.Close() }
