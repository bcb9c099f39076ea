package main

// The kubelet's periodic pod sync, which kwok lacks. kwok plays a Stage when a pod's watch event
// matches it; a play that fails with an error kwok does not retry (anything but connection
// refused, timeouts, 429 and 503: a reset connection, an API server answering 500 under load) is
// dropped, and with no later event for the pod it stays where it was for good: a Running pod told
// to exit never exits, a bound pod never runs. A kubelet syncs every pod every minute
// (--sync-frequency) and so never leaves one behind like that. Every period this finds pods
// whose next play (in kwok.yaml's Stages) is overdue and touches an annotation, so kwok sees an
// event and plays again; and it hands terminating pods back to the reaper in case their event
// was missed. Each touch is logged, so a run can count how often the player needed it.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/util/workqueue"
)

const (
	exitCodeAnnotation      = "kwok.kfop.dev/exit-code"
	completeAfterAnnotation = "kwok.kfop.dev/complete-after-ms"
	// Bumped to make kwok look at a pod again; its value is the time of the touch.
	syncedAnnotation = "kwok.kfop.dev/synced"
)

// overdue names the play kwok.yaml's Stages owe `pod` at `now`, if one has been owed for longer
// than `grace`: "ready" (bound, not yet running), "exit" (running with an exit code to make) or
// "complete" (running past its complete-after-ms).
func overdue(pod *corev1.Pod, now time.Time, grace time.Duration) string {
	if pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil {
		return ""
	}
	if pod.Status.PodIP == "" {
		if now.Sub(pod.CreationTimestamp.Time) > grace {
			return "ready"
		}
		return ""
	}
	if pod.Status.Phase != corev1.PodRunning || pod.Status.StartTime == nil {
		return ""
	}
	running := now.Sub(pod.Status.StartTime.Time)
	if _, ok := pod.Annotations[exitCodeAnnotation]; ok {
		if running > grace {
			return "exit"
		}
		return ""
	}
	if ms, ok := pod.Annotations[completeAfterAnnotation]; ok {
		if after, err := strconv.ParseInt(ms, 10, 64); err == nil && running > time.Duration(after)*time.Millisecond+grace {
			return "complete"
		}
	}
	return ""
}

// syncLoop runs the periodic sync until ctx ends.
func syncLoop(ctx context.Context, client kubernetes.Interface, pods listersv1.PodLister, queue workqueue.TypedRateLimitingInterface[victim], period, grace time.Duration) {
	ticker := time.NewTicker(period)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		all, err := pods.List(labels.Everything())
		if err != nil {
			continue
		}
		now := time.Now()
		for _, pod := range all {
			if pod.DeletionTimestamp != nil && pod.Spec.NodeName != "" && now.Sub(pod.DeletionTimestamp.Time) > grace {
				queue.Add(victim{pod.Namespace, pod.Name, pod.UID})
				continue
			}
			play := overdue(pod, now, grace)
			if play == "" {
				continue
			}
			if err := touch(ctx, client, pod, now); err != nil {
				fmt.Fprintf(os.Stderr, "pod-reaper: sync of %s/%s (%s overdue): %v\n", pod.Namespace, pod.Name, play, err)
				continue
			}
			fmt.Fprintf(os.Stderr, "pod-reaper: synced %s/%s: %s overdue\n", pod.Namespace, pod.Name, play)
		}
	}
}

// touch sets the synced annotation on this incarnation of the pod (UID precondition).
func touch(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, now time.Time) error {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{
			"uid":         pod.UID,
			"annotations": map[string]string{syncedAnnotation: now.UTC().Format(time.RFC3339Nano)},
		},
	})
	if err != nil {
		return err
	}
	callCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = client.CoreV1().Pods(pod.Namespace).Patch(callCtx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}
