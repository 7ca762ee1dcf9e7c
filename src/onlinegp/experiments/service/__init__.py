"""``onlinegp serve``: a live mapping service. Vehicles post observations to a durable log (:mod:`.store`), one
worker feeds them to a registered model in batches and checkpoints it (:mod:`.state`), and an HTTP app
(:mod:`.app`, FastAPI: needs the ``serve`` extra) serves the map, the next waypoints and a live page.

Importing this package imports neither FastAPI nor uvicorn; :mod:`.app` does."""
