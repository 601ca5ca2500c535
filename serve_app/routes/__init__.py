"""The ingress's routes, one module per group (the map is in ``serve_app.ingress``)."""
