"""The shape of every kernel's cost model, the launch arithmetic they share, and the fitted part.

Each kernel module turns (features, config, device) into ``CostTerms``: the bytes and FLOPs as
times at the device's ceilings, and the factors that keep a kernel from reaching them (load
imbalance, wave quantization, too few warps in flight). ``Coefficients`` combine the terms into a
time and are fitted to measured trials by least squares on log time; the prior (all exponents 1)
is the pure analytic model, so an unfitted model still ranks sensibly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from stuning.tuning.device import DeviceSpec

LAUNCH_US = 3.0  # launch and tail of one kernel as timed by do_bench


@dataclass(frozen=True)
class CostTerms:
    mem_us: float  # bytes at DRAM / L2 bandwidth
    compute_us: float  # FLOPs at the rate of the unit that does them
    imbalance: float = 1.0  # >= 1: work of the slowest program over the average one
    wave_eff: float = 1.0  # (0, 1]: programs / (waves * concurrent slots)
    latency: float = 1.0  # >= 1: slowdown from too little work in flight (occupancy)
    overhead_us: float = LAUNCH_US  # launches, reductions
    # The serial part: a loop whose every step waits on a load that the step before it addressed
    # (a gather by loaded indices), one step after another in each program, over the grid's waves.
    # Bandwidth does not shorten it; only fewer, longer steps or more programs in flight do.
    chain_us: float = 0.0

    @property
    def bound_us(self) -> float:
        return max(self.mem_us, self.compute_us)

    @property
    def work_us(self) -> float:
        """What the fitted exponent scales: the bound spread over the waves, or the serial chain
        when that is longer."""
        return max(self.bound_us / max(self.wave_eff, 1e-6), self.chain_us, 1e-6)


@dataclass(frozen=True)
class Launch:
    programs: int
    programs_per_sm: int
    occupancy: float  # resident threads / the SM's maximum
    waves: int
    wave_eff: float


def launch_shape(programs: int, threads: int, regs_per_thread: int, smem_bytes: int, device: DeviceSpec) -> Launch:
    """How many programs fit on an SM at once, and how the grid falls into waves."""
    by_threads = device.max_threads_per_sm // threads
    by_regs = device.regs_per_sm // max(1, regs_per_thread * threads)
    by_smem = (device.smem_per_sm_kb * 1024) // smem_bytes if smem_bytes else device.max_programs_per_sm
    per_sm = max(1, min(by_threads, by_regs, by_smem, device.max_programs_per_sm))
    slots = per_sm * device.sm_count
    programs = max(1, programs)
    waves = math.ceil(programs / slots)
    return Launch(
        programs=programs,
        programs_per_sm=per_sm,
        occupancy=min(1.0, per_sm * threads / device.max_threads_per_sm),
        waves=waves,
        wave_eff=programs / (waves * slots) if waves > 1 else 1.0,
    )


def sm_balance(programs: int, device: DeviceSpec) -> float:
    """>= 1: the most programs an SM gets over the mean share, for a grid that runs in one wave.
    A kernel bound by each SM's own throughput (shared memory, instruction issue) ends with its
    busiest SM, however short the wave: 688 programs on 132 SMs put 6 on some, 15% over 5.2. A grid
    with fewer programs than SMs is 1: what it leaves idle is the occupancy's part of the model."""
    share = programs / device.sm_count
    return math.ceil(share) / share if share > 1 else 1.0


def memory_us(dram_bytes: float, l2_bytes: float, device: DeviceSpec) -> float:
    """Bytes from device memory and from L2, each at its bandwidth."""
    return dram_bytes / (device.dram_gbs * 1e3) + l2_bytes / (device.l2_gbs * 1e3)


def cuda_core_terms(*, dram: float, l2: float, flops: float, imbalance: float, programs: int, threads: int,
                    regs: int, device: DeviceSpec, steps: float = 0.0, longest_steps: float = 0.0) -> CostTerms:
    """Terms of a gather kernel on CUDA cores (SpMM, SDDMM): fp32 FMAs, no shared memory, and
    enough loads in flight only from half occupancy up. ``steps``: the dependent load steps of a
    program of the typical length, which make the serial chain over the waves; ``longest_steps``:
    those of the longest program, a chain of its own however many programs run beside it."""
    launch = launch_shape(programs, threads, regs, 0, device)
    return CostTerms(
        chain_us=max(chain_us(steps, launch, device), longest_steps * device.mem_latency_us),
        mem_us=memory_us(dram, l2, device),
        compute_us=flops / (device.fp32_tflops * 1e6),
        imbalance=imbalance,
        wave_eff=launch.wave_eff,
        latency=latency_factor(launch.occupancy, 0.5),
    )


def chain_us(steps: float, launch: Launch, device: DeviceSpec) -> float:
    """``steps`` dependent memory latencies in a row, once per wave of resident programs (a
    fractional wave: programs that finish early make room for the next ones)."""
    slots = launch.programs_per_sm * device.sm_count
    return steps * device.mem_latency_us * max(1.0, launch.programs / slots)


def latency_factor(occupancy: float, needed: float) -> float:
    """Below ``needed`` occupancy the memory system is not kept busy: time grows as 1/occupancy."""
    return max(1.0, needed / max(occupancy, 1e-3))


def sector_efficiency(contiguous_bytes: float, sector: int = 32) -> float:
    """Fraction of fetched bytes that are used when each access is ``contiguous_bytes`` long."""
    if contiguous_bytes <= 0:
        return 1.0
    return contiguous_bytes / (math.ceil(contiguous_bytes / sector) * sector)


PRIOR = (0.0, 1.0, 1.0, 1.0)  # log scale, exponents of: bound/wave_eff, imbalance, latency

# The most a config's summed effects may move its prediction (log scale: 0.3 is a factor of 1.35).
# Effects are fitted on the configs tuning kept, each problem's near-best, and a config has ~45 of
# them (values and pairs); ranking a whole space is an arg-min over thousands of configs, which
# finds those whose untested combinations of effects add up most negative. Uncapped, the shipped
# H200 fit summed -1.65 on sliced-ELL configs at N = 2048-8192 and chose them over the scatter
# kernel at 7-13x its time. Its picks over whole fp16 SpMM spaces, timed (BENCHMARKS.md 8p), ran
# 1.67x the tuned configs' time uncapped, 1.14-1.15x capped at 0.2 or 0.3, 1.20x at 0.5; capping all
# but each kernel's own effect ('kernel=scatter', -0.34) did worse, 1.21x. Held-out picks on the
# recorded full sweeps (tests/data/h200_trials.csv.gz), where a fit sees bad configs too, lost
# less at 0.3 than at 0.2 (SpMM 1.55 -> 1.74 against 1.95; 2:4 1.18 -> 1.33 against 1.38).
EFFECT_CAP = 0.3


def config_features(config) -> list[str]:
    """One name per (template parameter, value) of a config, e.g. 'vec=4', and per pair of them
    ('num_warps=8,rows=16'): tile shapes interact with the warps that share them."""
    if config is None:
        return []
    if hasattr(config, "feature_items"):
        items = sorted(config.feature_items().items())
    else:
        items = sorted(config.as_dict().items() if hasattr(config, "as_dict") else dict(config).items())
    single = [f"{k}={v}" for k, v in items]
    pairs = [f"{a},{b}" for i, a in enumerate(single) for b in single[i + 1:]]
    return single + pairs


@dataclass
class Coefficients:
    """t = overhead + exp(c0 + effects) * work^c1 * imbalance^c2 * latency^c3, where work is
    the longer of bound / wave_eff and the serial chain (``CostTerms.work_us``).

    ``effects`` are fitted log-time offsets per template-parameter value ('vec=1', 'num_warps=8'):
    what the analytic terms do not see (instruction counts of narrow loads, cross-warp reductions,
    code generation), learned from measured trials and shrunk toward 0 when trials are few. A
    prediction takes their sum within EFFECT_CAP.
    """

    c: tuple = PRIOR
    fitted_on: int = 0  # trials behind the fit (the most of any fit it started from)
    effects: dict = field(default_factory=dict)
    trials: str = ""  # a digest of the trials last fitted on (CostModel.fit: a refit on them is a no-op)

    def effect_offset(self, config) -> float:
        """The config's effects summed, within EFFECT_CAP (log time)."""
        offset = sum(self.effects.get(name, 0.0) for name in config_features(config))
        return min(EFFECT_CAP, max(-EFFECT_CAP, offset))

    def predict_us(self, t: CostTerms, config=None) -> float:
        c0, c1, c2, c3 = self.c
        offset = self.effect_offset(config)
        return t.overhead_us + math.exp(c0 + offset) * t.work_us**c1 * t.imbalance**c2 * t.latency**c3

    def as_dict(self) -> dict:
        out = {"c": list(self.c), "fitted_on": self.fitted_on, "effects": dict(sorted(self.effects.items()))}
        return {**out, "trials": self.trials} if self.trials else out

    @classmethod
    def from_dict(cls, d: dict) -> Coefficients:
        return cls(tuple(d.get("c", PRIOR)), int(d.get("fitted_on", 0)), dict(d.get("effects", {})),
                   str(d.get("trials", "")))


def _design_row(t: CostTerms) -> list[float]:
    return [1.0, math.log(t.work_us), math.log(t.imbalance), math.log(t.latency)]


# Effects are offsets for every shape, but one problem's trials share its shape: what is fast there,
# or the model's misfit of that shape, looks like an effect of the values its fast configs share,
# however many trials say so. So a problem's trials are taken to share a deviation of each effect
# from its all-shape value, of this variance (in units of one trial's noise, the scale on which
# effect_ridge counts trials): a problem tells at most 1 / 0.75 trials' worth about an effect, a
# third of the prior's 4, and 300 trials of one count about as much as 20 of another. On synthetic
# trials (tests/test_cost_model.py) an effect seen on one problem moves 0.4 of an unguarded fit's
# way, on eight 0.77. On the recorded H200 trials (tests/data) the held-out rank correlation rose
# (SpMM 0.51 to 0.57, SDDMM 0.47 to 0.49, 2:4 0.64), and refits on two problems' top five trials,
# as a user's tune makes, cost the other problems' picks 1.6 / 1.9 / 1.1% (SpMM / SDDMM / 2:4; worst
# pair 5 / 10 / 16%), not 1.5 / 3.3 / 13% (20 / 12 / 29%).
PROBLEM_DEVIATION = 0.75


def _normal_equations(x: np.ndarray, y: np.ndarray, z: np.ndarray, problems: list | None):
    """X^T V^-1 X and X^T V^-1 y, where V is the trials' covariance: the identity, plus for the
    trials of one problem PROBLEM_DEVIATION z z^T (the effects they carry, ``z``, shared)."""
    if problems is None:
        return x.T @ x, x.T @ y
    groups: dict = {}
    for i, p in enumerate(problems):
        groups.setdefault(p, []).append(i)
    xy = np.column_stack([x, y])
    out = np.zeros((x.shape[1], x.shape[1] + 1))
    for rows in groups.values():
        zp = z[rows][:, z[rows].any(axis=0)]
        # Woodbury: V^-1 = I - z (I / dev + z^T z)^-1 z^T, solved in the problem's effects, not its trials.
        inner = np.eye(zp.shape[1]) / PROBLEM_DEVIATION + zp.T @ zp
        out += x[rows].T @ xy[rows] - (zp.T @ x[rows]).T @ np.linalg.solve(inner, zp.T @ xy[rows])
    return out[:, :-1], out[:, -1]


def fit_coefficients(
    terms: list[CostTerms],
    times_us: list[float],
    configs: list | None = None,
    *,
    ridge: float = 1.0,
    effect_ridge: float = 4.0,
    prior: Coefficients | None = None,
    problems: list | None = None,
) -> Coefficients:
    """Least squares on log time, pulled (ridge) toward ``prior`` (default: the analytic model, no
    effects) so a few trials cannot push it anywhere odd: refitting a good fit on a handful of new
    trials moves it a little, not back to the start. The exponents stay non-negative, so more work
    is never predicted faster.

    ``problems``: a hashable id per trial, the problem it timed; with them an effect is learned
    from how many problems show it, not how many trials (PROBLEM_DEVIATION). None fits the trials
    as independent."""
    prior = prior or Coefficients()
    configs = configs if configs is not None else [None] * len(terms)
    ids = problems if problems is not None else [None] * len(terms)
    rows, ys, names_per_row, row_problems = [], [], [], []
    for t, y, cfg, prob in zip(terms, times_us, configs, ids, strict=True):
        excess = y - t.overhead_us
        if y > 0 and math.isfinite(y) and excess > 0:
            rows.append(_design_row(t))
            ys.append(math.log(excess))
            names_per_row.append(config_features(cfg))
            row_problems.append(prob)
    if len(rows) < 3:
        return Coefficients(tuple(prior.c), prior.fitted_on, dict(prior.effects))
    row_problems = row_problems if problems is not None else None
    names = sorted({n for ns in names_per_row for n in ns} | set(prior.effects))
    index = {n: i for i, n in enumerate(names)}
    onehot = np.zeros((len(rows), len(names)))
    for r, ns in enumerate(names_per_row):
        for n in ns:
            onehot[r, index[n]] = 1.0
    base = np.asarray(rows)
    y = np.asarray(ys)
    x = np.hstack([base, onehot])
    effect_prior = np.asarray([prior.effects.get(n, 0.0) for n in names])
    target = np.concatenate([np.asarray(prior.c), effect_prior])
    # Minimise (X c - y)^T V^-1 (X c - y) + sum_j ridge_j (c_j - target_j)^2 (no pull on the intercept).
    reg = np.diag([0.0, ridge, ridge, ridge] + [effect_ridge] * len(names))
    xx, xy = _normal_equations(x, y, onehot, row_problems)
    sol = np.linalg.solve(xx + reg, xy + reg @ target)
    c = sol[:4].copy()
    c[1] = float(np.clip(c[1], 0.5, 1.5))
    c[2:] = np.clip(c[2:], 0.0, 3.0)
    # With the exponents clipped, refit the intercept and effects on what is left.
    rest = y - base[:, 1:] @ c[1:]
    x2 = np.hstack([np.ones((len(rows), 1)), onehot])
    reg2 = np.diag([0.0] + [effect_ridge] * len(names))
    xx2, xy2 = _normal_equations(x2, rest, onehot, row_problems)
    sol2 = np.linalg.solve(xx2 + reg2, xy2 + reg2 @ np.concatenate([[0.0], effect_prior]))
    c[0] = float(sol2[0])
    effects = {n: float(v) for n, v in zip(names, sol2[1:], strict=True)}
    return Coefficients(tuple(float(v) for v in c), max(prior.fitted_on, len(rows)), effects)
