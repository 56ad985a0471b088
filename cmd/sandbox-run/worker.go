package main

import "github.com/sandbox-run/sandbox-run/internal/app/clustercmd"

func cmdWorker(args []string) int  { return clustercmd.Worker(args, fatalf) }
func cmdCluster(args []string) int { return clustercmd.Cluster(args, fatalf) }
