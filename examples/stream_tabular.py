"""Stream a table through VIPS, an online sparse GP that chooses its own number of inducing points.

The same protocol as `onlinegp stream` (an 80/20 split, the training rows in batches sorted by the first input,
the test rows predicted after every batch), once from Python with your own arrays and once through
`onlinegp.experiments.stream.run_stream` on a bundled UCI set. For a CSV of your own, `run_stream` and `onlinegp stream
--dataset my.csv` take the last column as the target.

Run: python examples/stream_tabular.py  (about 10 s)
"""

import numpy as np
import torch

import onlinegp
from onlinegp.experiments.stream import StreamConfig, run_stream

# 1. your own arrays: X (N, D) and y (N,), streamed in 5 batches in the order they arrive
rng = np.random.default_rng(0)
X = rng.uniform(-3, 3, size=(1000, 3))
y = np.sin(X[:, 0]) + 0.5 * X[:, 1] ** 2 - X[:, 2] + 0.1 * rng.standard_normal(1000)
test = slice(800, None)  # the last 200 rows are held out
model = onlinegp.VIPS()  # the model size grows with what the data need
for part in np.array_split(np.arange(800), 5):
    report = model.update(X[part], y[part])
    pred = model.predict(X[test])
    rmse = float(np.sqrt(np.mean((pred.mean.numpy() - y[test]) ** 2)))
    print(f"{report.num_data:4d} rows: M = {report.num_inducing:3d}, test RMSE {rmse:.3f}, {report.total_time:.2f} s")

# 2. a bundled dataset through the experiment runner (what `onlinegp stream` runs); rows hold RMSE and NLPD in
# standardised target units after each batch
rows = run_stream(StreamConfig("concrete", model="vips", batches=4, max_size=400))
for r in rows:
    print(f"concrete, batch {r['batch']}: M = {r['num_inducing']}, RMSE {r['rmse']:.3f}, NLPD {r['nlpd']:.3f}")
assert torch.isfinite(torch.tensor([r["rmse"] for r in rows])).all()
