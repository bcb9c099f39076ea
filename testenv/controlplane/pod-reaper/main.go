// pod-reaper plays the parts of a kubelet that kwok lacks, on kwok nodes: the last step of a
// pod's deletion (once a bound pod is terminating, it deletes it for good with grace period 0
// and a UID precondition), and the periodic pod sync (sync.go).
//
// kwok's own `delete` stage deletes by name alone, so a delete meant for a terminating pod can
// remove a newer pod created under the same name in between (a controller replacing it). The UID
// precondition makes that delete fail instead, exactly as the kubelet's status manager does.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/time/rate"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
)

// victim names one pod incarnation: a recreated pod of the same name has another UID.
type victim struct {
	namespace, name string
	uid             types.UID
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster whose pods to reap")
	workers := flag.Int("workers", 8, "parallel deletes")
	syncPeriod := flag.Duration("sync-period", 5*time.Second, "how often pods owed a play are looked for")
	syncGrace := flag.Duration("sync-grace", 10*time.Second, "how long a play may be owed before the pod is touched")
	flag.Parse()
	if err := run(*kubeconfig, *workers, *syncPeriod, *syncGrace); err != nil {
		fmt.Fprintln(os.Stderr, "pod-reaper:", err)
		os.Exit(1)
	}
}

func run(kubeconfig string, workers int, syncPeriod, syncGrace time.Duration) error {
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("reading --kubeconfig: %w", err)
	}
	config.QPS, config.Burst = 500, 1000
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	// Retries back off to 5 s at most: the default limiter's 1,000 s cap left pods whose deletes
	// failed through an API server restart terminating for many minutes.
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[victim](5*time.Millisecond, 5*time.Second),
		&workqueue.TypedBucketRateLimiter[victim]{Limiter: rate.NewLimiter(rate.Limit(50), 500)},
	))
	defer queue.ShutDown()
	enqueue := func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok && pod.DeletionTimestamp != nil && pod.Spec.NodeName != "" {
			queue.Add(victim{pod.Namespace, pod.Name, pod.UID})
		}
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	pods := factory.Core().V1().Pods().Informer()
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	go syncLoop(ctx, client, factory.Core().V1().Pods().Lister(), queue, syncPeriod, syncGrace)
	for i := 0; i < workers; i++ {
		go func() {
			for reap(ctx, client, queue) {
			}
		}()
	}
	<-ctx.Done()
	factory.Shutdown()
	return nil
}

// reap deletes one queued pod; it returns false once the queue shuts down.
func reap(ctx context.Context, client kubernetes.Interface, queue workqueue.TypedRateLimitingInterface[victim]) bool {
	v, shutdown := queue.Get()
	if shutdown {
		return false
	}
	defer queue.Done(v)
	grace := int64(0)
	opts := metav1.DeleteOptions{
		GracePeriodSeconds: &grace,
		Preconditions:      &metav1.Preconditions{UID: &v.uid},
	}
	callCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := client.CoreV1().Pods(v.namespace).Delete(callCtx, v.name, opts)
	switch {
	case err == nil, apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// Gone, or the name now belongs to a newer pod that is not ours to delete.
		queue.Forget(v)
	default:
		fmt.Fprintf(os.Stderr, "pod-reaper: deleting %s/%s: %v (will retry)\n", v.namespace, v.name, err)
		queue.AddRateLimited(v)
	}
	return true
}
