// Added to training-operator v1.8.1's main package at build time (a `go build -overlay`; see
// peer.env). v1.8.1 has no flag for its client's rate limit: ctrl.GetConfigOrDie leaves QPS 20
// and burst 30, controller-runtime's defaults. These two flags set them, so that a benchmark can
// run Kubeflow and kfop at the same client limits. A negative QPS turns client-go's limiter off.

package main

import (
	"flag"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
)

var (
	kubeAPIQPS   = flag.Float64("kube-api-qps", 0, "Client-side request rate; 0 keeps controller-runtime's 20, a negative value turns the limiter off.")
	kubeAPIBurst = flag.Int("kube-api-burst", 0, "Client-side burst; 0 keeps controller-runtime's 30.")
)

func init() {
	// main calls ctrl.GetConfigOrDie after flag.Parse.
	ctrl.GetConfigOrDie = func() *rest.Config {
		cfg := config.GetConfigOrDie()
		if *kubeAPIQPS != 0 {
			cfg.QPS = float32(*kubeAPIQPS)
		}
		if *kubeAPIBurst != 0 {
			cfg.Burst = *kubeAPIBurst
		}
		setupLog.Info("client limits", "qps", cfg.QPS, "burst", cfg.Burst)
		return cfg
	}
}
