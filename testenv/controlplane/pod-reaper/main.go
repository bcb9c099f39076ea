// pod-reaper plays the last step of a kubelet's pod deletion on kwok nodes: once a bound pod is
// terminating, it deletes it for good with grace period 0 and a UID precondition.
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
	flag.Parse()
	if err := run(*kubeconfig, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "pod-reaper:", err)
		os.Exit(1)
	}
}

func run(kubeconfig string, workers int) error {
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

	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[victim]())
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
