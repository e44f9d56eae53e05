"""One module per storage stack, behind the `Backend` protocol in base.py."""
