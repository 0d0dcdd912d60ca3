"""The live status pages: `/`, `/services/NAMESPACE/NAME` and the JSON API under /api/v1.

`table` and `facts` turn one published state into rows and facts, `render` turns those
into HTML (pure functions), `app` is the WSGI glue that `serve` mounts.
"""
