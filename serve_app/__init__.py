"""Ray Serve application: the HTTP ingress, recall and embedder deployments."""
