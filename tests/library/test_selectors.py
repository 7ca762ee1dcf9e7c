"""Adaptive-size selectors: Conditional Variance, OIPS and VIPSSelector follow their rules; names; POAM accepts
VIPSSelector; every model hands its selector an explicit SelectionContext."""

import numpy as np
import pytest
import torch

from onlinegp import POAM, Training
from onlinegp.inducing import (
    OIPS,
    SELECTORS,
    ConditionalVariance,
    KeepAfterFirst,
    KeptOrSelected,
    PivotedCholesky,
    SelectionContext,
    VIPSSelector,
    make_selector,
    residual_traces,
    unique_rows,
)
from onlinegp.kernels import dense, diagonal, make_kernel
from onlinegp.models import make_model
from onlinegp.objectives import noise_log_lik, online_bound, online_bounds
from onlinegp.posterior import InducingPosterior, kuu

D = torch.float64


def data(n, dim=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, dim, dtype=D, generator=g) * 2 - 1
    return X, torch.sin(3 * X[:, 0]) * torch.cos(2 * X[:, -1]) + 0.05 * torch.randn(n, dtype=D, generator=g)


@torch.no_grad()
def dense_trace(kernel, Z, C):
    Kzc = dense(kernel, Z, C)
    return float(diagonal(kernel, C).sum() - (Kzc * torch.linalg.solve(kuu(kernel, Z), Kzc)).sum())


@pytest.mark.parametrize("eta", [0.5, 0.1, 0.01])
def test_conditional_variance_stops_at_first_prefix_below_eta(eta):
    k = make_kernel("rbf", 2, D, lengthscale=0.3)
    Zold, _ = data(15, seed=1)
    X, _ = data(200, seed=2)
    Z = ConditionalVariance(eta)(k, Zold, X)
    C = torch.cat([Zold, X])
    assert dense_trace(k, Z, C) <= eta + 1e-9
    assert dense_trace(k, Z[:-1], C) > eta  # one point fewer breaks the rule
    assert all(bool((C == z).all(1).any()) for z in Z)  # chosen from the pool [Z_old; X]
    Zs = ConditionalVariance(eta)(k, None, X)
    assert dense_trace(k, Zs, X) <= eta + 1e-9 < dense_trace(k, Zs[:-1], X)


def test_residual_traces_match_dense():
    k = make_kernel("matern32", 2, D, lengthscale=0.4)
    C, _ = data(80, seed=3)
    idx = torch.tensor([5, 17, 2, 40, 61])
    tr = residual_traces(k, C, idx)
    for m in range(1, 6):
        assert float(tr[m - 1]) == pytest.approx(dense_trace(k, C[idx[:m]], C), rel=1e-8, abs=1e-8)


@pytest.mark.parametrize("rho", [0.5, 0.8, 0.95])
def test_oips_adds_exactly_the_points_uncorrelated_with_the_set_so_far(rho):
    k = make_kernel("rbf", 2, D, lengthscale=0.25)
    k.outputscale = 2.0  # the rule uses correlations
    Zold, _ = data(6, seed=4)
    X, _ = data(120, seed=5)
    Z = OIPS(rho)(k, Zold, X)
    assert torch.equal(Z[:6], Zold)  # old inducing inputs kept
    corr = lambda A, B: (dense(k, A, B) / 2.0).detach().numpy()  # unit-variance correlation
    chosen = Zold
    for x in X:  # replay the rule in stream order
        if corr(x[None], chosen).max() < rho:
            chosen = torch.cat([chosen, x[None]])
    assert torch.equal(Z, chosen)
    new = Z[6:]
    c = corr(new, new) - np.eye(len(new))
    assert c.max() < rho


def test_vips_selector_keeps_old_points_and_stops_where_the_rule_says():
    k = make_kernel("rbf", 2, D, lengthscale=0.3)
    s2 = torch.tensor(0.01, dtype=D)
    Xo, yo = data(60, seed=6)
    Zold = Xo[:12]
    K = dense(k, Zold, Xo)
    old = InducingPosterior.from_terms(k, Zold, K @ yo / s2, K @ K.T / s2)
    X, y = data(150, seed=7)

    context = SelectionContext(
        targets=y, noise=s2, past=lambda: old, target_moments=lambda: (float(yo.mean()), float(yo.var()))
    )
    sel = VIPSSelector(delta=0.05)
    Z = sel(k, Zold, X, context=context)
    assert torch.equal(Z[:12], Zold) and Z.shape[0] > 12
    step = sel.last
    m = Z.shape[0]
    assert step.num_old == 12 and step.num_added == m - 12
    b = online_bounds(k, s2, Z, X, y, old)
    l_noise = float(noise_log_lik(y, float(yo.mean()), float(yo.var())))
    assert step.noise_log_lik == pytest.approx(l_noise)
    assert step.reference == pytest.approx(float(step.lower_path[-1]))  # the greedy set spans the batch: L*
    assert step.alpha == pytest.approx(0.05 * abs(step.reference - l_noise))
    assert step.reference - float(b.lower[-1].detach()) <= step.alpha + 1e-9  # rule met at M_b
    if m > 13:
        assert step.reference - float(b.lower[-2].detach()) > step.alpha  # and not one point earlier
    tighter = VIPSSelector(delta=0.005)(k, Zold, X, context=context)
    assert tighter.shape[0] >= m


def test_selector_names_and_errors():
    assert {"vips", "conditional-variance", "oips"} <= set(SELECTORS)
    assert isinstance(make_selector("vips"), VIPSSelector) and isinstance(make_selector("oips", 100), OIPS)
    for bad in (lambda: VIPSSelector(delta=0), lambda: OIPS(rho=1.5), lambda: ConditionalVariance(eta=-1)):
        with pytest.raises(ValueError):
            bad()
    k1, X1 = make_kernel("rbf", 1, D), torch.zeros(3, 1, dtype=D)
    with pytest.raises(ValueError, match="needs a SelectionContext"):
        VIPSSelector()(k1, None, X1)
    with pytest.raises(ValueError, match="needs a SelectionContext"):  # targets but no moments (OSGPR, OSVGP)
        VIPSSelector()(k1, None, X1, context=SelectionContext(targets=torch.zeros(3, dtype=D), noise=torch.ones(())))
    full = SelectionContext(targets=torch.zeros(2, dtype=D), noise=torch.ones(()), target_moments=lambda: (0.0, 1.0))
    with pytest.raises(ValueError, match="2 targets for 3 inputs"):
        VIPSSelector()(k1, None, X1, context=full)


def test_osgpr_and_osvgp_refuse_the_vips_selector_they_give_no_moments_to():
    X, y = data(40)
    for name in ("osgpr", "osvgp"):
        model = make_model(name, 2, inducing="vips", num_steps=1)
        with pytest.raises(ValueError, match="needs a SelectionContext"):
            model.update(X, y)
        assert model.num_updates == 0


class Recording:
    """A custom selector that records the context each call receives, with the summary of the past and the targets'
    moments it gives during the call, and picks as ``inner`` does (whose attributes, such as VIPSSelector's
    ``last``, it shows)."""

    def __init__(self, inner):
        self.inner, self.contexts, self.seen = inner, [], []

    def __call__(self, kernel, Z, X, *, generator=None, context=None):
        self.contexts.append(context)
        self.seen.append((context.past(), context.target_moments()))
        return self.inner(kernel, Z, X, generator=generator, context=context)

    def __getattr__(self, name):
        return getattr(self.__dict__["inner"], name)


@pytest.mark.parametrize(
    "name, options",
    [
        ("osgpr", {}),
        ("vips", {}),
        ("osvgp", {}),
        ("poam", {"training": {"pretrain": {"steps": 0}}}),
        ("var-ssgp", {"training": {"pretrain": {"steps": 0}}}),
    ],
)
def test_every_model_hands_its_selector_an_explicit_context(name, options):
    """The selector gets a SelectionContext with the batch's (scaled) targets, σ² and the model's counts; it never
    gets the model."""
    X, y = data(70)
    model = make_model(name, 2, num_steps=1, y_stats=(0.0, 1.0), **options)
    selector = Recording(model.selector if name == "vips" else PivotedCholesky(20))
    model.selector = selector  # VIPS fixes its selector at construction: wrap it
    model.update(X[:40], y[:40])
    Z1, noise1 = model.Z.clone(), model.noise.detach().clone()  # what the second update selects under
    model.update(X[40:], y[40:])
    assert [type(c) for c in selector.contexts] == [SelectionContext] * 2
    first, second = selector.contexts
    (past1, _), (past2, moments2) = selector.seen
    assert torch.equal(second.targets, y[40:]) and second.targets.shape[0] == 30
    assert (first.num_data, first.num_updates, second.num_data, second.num_updates) == (0, 0, 40, 1)
    assert torch.equal(second.noise, noise1) and not second.noise.requires_grad
    if name in ("osgpr", "vips", "poam"):
        assert past1 is None and torch.equal(past2.Z, Z1)  # the summary the batch is absorbed into
    if name in ("vips", "poam", "var-ssgp"):  # POAM's family keeps its targets; of OSGPR's, VIPS keeps their moments
        assert moments2 == pytest.approx((float(y.mean()), float(y.var())))
    else:
        assert moments2 is None


def test_keep_after_first_reads_the_counts_from_the_context():
    k = make_kernel("rbf", 2, D, lengthscale=0.3)
    X, _ = data(40)
    keep = KeepAfterFirst(PivotedCholesky(30))
    Z = X[:5].clone()
    assert torch.equal(keep(k, Z, X), Z)  # no context: counts 0, Z kept
    grown = keep(k, Z, X, context=SelectionContext(num_data=5, num_updates=1))
    assert grown.shape[0] > 5 and torch.equal(grown[:5], Z)


def test_kept_or_selected_takes_the_set_with_the_higher_online_bound():
    """The old inducing inputs are kept where they bound the batch better (a batch where a well-spread old set already
    lies), the selector's set is taken where it does (a batch elsewhere), and below the selector's size, on a first
    batch or without a context, the selector decides alone."""
    k = make_kernel("rbf", 2, D, lengthscale=0.4).requires_grad_(False)
    s2 = torch.tensor(0.01, dtype=D)
    g = torch.Generator().manual_seed(3)
    grid = torch.stack(torch.meshgrid(torch.linspace(-1, -0.2, 3), torch.linspace(-1, 1, 4), indexing="ij"), -1)
    Zold = grid.reshape(-1, 2).to(D)  # 12 spread inputs over x0 in [-1, -0.2]

    def batch(low, high, n=60):
        X = torch.rand(n, 2, dtype=D, generator=g) * torch.tensor([high - low, 2.0], dtype=D)
        X = X + torch.tensor([low, -1.0], dtype=D)
        return X, torch.sin(3 * X[:, 0]) * torch.cos(2 * X[:, 1]) + 0.1 * torch.randn(n, dtype=D, generator=g)

    Xo, yo = batch(-1.0, -0.2, 200)
    K = dense(k, Zold, Xo)
    old = InducingPosterior.from_terms(k, Zold, K @ yo / s2, K @ K.T / s2)
    chooser, pivoted = KeptOrSelected(PivotedCholesky(12)), PivotedCholesky(12)
    for (low, high), keeps in (((-1.0, -0.2), True), ((0.4, 1.0), False)):
        X, y = batch(low, high)
        context = SelectionContext(targets=y, noise=s2, past=lambda: old)
        selected = pivoted(k, Zold, X)
        kept_bound, selected_bound = (float(online_bound(k, s2, Z, X, y, old)) for Z in (Zold, selected))
        assert (kept_bound > selected_bound) == keeps and not torch.equal(selected, Zold)
        assert torch.equal(chooser(k, Zold, X, context=context), Zold if keeps else selected)
        assert chooser.num_inducing == 12
    X, y = batch(-1.0, -0.2)
    context = SelectionContext(targets=y, noise=s2, past=lambda: old)
    grown = KeptOrSelected(PivotedCholesky(20))(k, Zold, X, context=context)
    assert torch.equal(grown, PivotedCholesky(20)(k, Zold, X)) and grown.shape[0] == 20
    assert torch.equal(chooser(k, Zold, X), pivoted(k, Zold, X))  # no context: the selector's set
    first = SelectionContext(targets=y, noise=s2)  # no summary yet
    assert torch.equal(chooser(k, None, X, context=first), pivoted(k, None, X))
    assert isinstance(make_selector("pivoted-or-kept", 12), KeptOrSelected)


def test_poam_with_vips_grows_with_an_expanding_domain():
    """POAM takes the VIPS selector (bound computed from its projected terms) and sizes itself."""
    g = torch.Generator().manual_seed(0)
    x = torch.sort(torch.rand(400, dtype=D, generator=g) * 10).values[:, None]
    y = torch.sin(2 * x[:, 0]) + torch.cos(5 * x[:, 0]) + 0.3 * torch.randn(400, dtype=D, generator=g)
    model = POAM(
        1,
        kernel="rbf",
        inducing=VIPSSelector(),
        training=Training(steps=0),
        x_bounds=[[0.0], [10.0]],
        kernel_options={"lengthscale": 0.1},
        noise=0.09,
    )
    sizes = [model.update(x[i : i + 40], y[i : i + 40]).num_inducing for i in range(0, 400, 40)]
    steps = np.diff(sizes)
    assert (steps > 0).all() and sizes[-1] >= 5 * sizes[0]
    grid = torch.linspace(0.5, 9.5, 100, dtype=D)[:, None]
    err = model.predict(grid).mean - (torch.sin(2 * grid[:, 0]) + torch.cos(5 * grid[:, 0]))
    assert float(err.pow(2).mean().sqrt()) < 0.2


def distinct(Z: torch.Tensor) -> bool:
    return len(torch.unique(Z, dim=0)) == len(Z)


@pytest.mark.parametrize("name", ["kmeans", "random"])
def test_pool_selectors_never_pick_a_duplicated_input_twice(name):
    """Issue 35, item 7: z-kmeans on duplicated inputs chose coincident centres (K_zz singular)."""
    k = make_kernel("rbf", 2, D, lengthscale=0.3)
    X, _ = data(60)
    X = torch.cat([X, X[:40], X[:40]])  # 60 distinct inputs among 140
    g = torch.Generator().manual_seed(0)
    for Z_old, M in [(None, 50), (None, 100), (X[:30], 50), (X[:30], 200)]:
        Z = make_selector(name, M)(k, Z_old, X, generator=g)
        assert distinct(Z) and len(Z) == min(M, 60)


def test_unique_rows_keeps_first_occurrences_in_order_and_a_pool_without_repeats_as_it_is():
    X, _ = data(10)
    assert unique_rows(X) is X  # so picks from such a pool draw exactly as before duplicates were skipped
    assert torch.equal(unique_rows(torch.cat([X[:3], X[1:2], X[3:], X])), X)


@pytest.mark.parametrize("name", ["z-kmeans", "z-rand"])
def test_kmeans_and_random_ablations_on_a_stream_with_duplicates(name):
    from onlinegp.models import make_model

    g = torch.Generator().manual_seed(0)
    X = torch.rand(600, 2, dtype=D, generator=g) * 10
    X[1::2] = X[::2]  # every input twice
    f = lambda x: torch.sin(x[:, 0] / 1.5) * torch.cos(x[:, 1] / 2)  # noqa: E731
    y = f(X) + 0.05 * torch.randn(600, dtype=D, generator=g)
    model = make_model(name, seed=0, num_inducing=200, num_steps=2)
    for b in range(6):
        model.update(X[100 * b : 100 * (b + 1)], y[100 * b : 100 * (b + 1)])
        assert distinct(model.Z), f"update {b}: {len(model.Z) - len(torch.unique(model.Z, dim=0))} repeated"
    Xt = torch.rand(200, 2, dtype=D, generator=g) * 10
    assert float((model.predict(Xt).mean - f(Xt)).pow(2).mean().sqrt() / f(Xt).std()) < 0.2
