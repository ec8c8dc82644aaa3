"""The learned step critic (issue 8): per-step features, a listwise step model, training with a
held-out split by task, and artifacts. Plain Python and numpy (the encoder also torch and
transformers): no Django, so the `critic` backend can load it in any worker. The one
exception is `jobs`, the database side (labels, training rows, the critic judge), which the
backend never imports."""

ENCODERS = ("minilm", "hashing")  # workers/critic/encoder.py; here so pages need no numpy
