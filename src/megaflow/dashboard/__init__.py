"""The web dashboard (``megaflow dashboard``): runs, tasks, grades and trajectories in a browser.

It reads the configured stores (a :class:`~megaflow.storage.abstract.MetadataStore`
and an :class:`~megaflow.storage.abstract.ArtifactStore`) on every request and
keeps no copy of their data. :mod:`.queries` turns the stores into the JSON the
pages show, :mod:`.auth` keeps every page and API behind the bearer token, and
:mod:`.server` is the FastAPI app with its live stream (server-sent events).
The pages are plain HTML and JavaScript under ``static/`` with uPlot vendored
for the charts, so nothing is built and nothing is fetched from a CDN.
"""
