"""Floor 4, a door: the local web Hub. ``server`` (the loopback server, its token and its
limits), ``app`` (the routes, and the one place an error becomes an HTTP status), ``table`` (the
listing's rows as the page wants them), ``static/`` (the page). May import every floor below."""
