"""The peers' settings from the environment: rounds, steps, and the thread candidates."""
import dataclasses

# Thread variables cleared before every run: vescale-train runs with its defaults, a peer with
# exactly the setting it names.
CLEARED = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "MALLOC_MMAP_THRESHOLD_",
           "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")


@dataclasses.dataclass
class PeerSettings:
    """PEER_ROUNDS, PEER_STEPS, and the candidates (';'-separated settings of VAR=value words):
    PEER_1_ENVS for today's PyTorch on 1 process (ATen's threads, which MKL follows, at 1 or 2),
    PEER_2_ENVS on 2 (1 each), PEER_PY1_ENVS for Debian's PyTorch 1.13 (1 intra-op thread, OpenBLAS
    on 1 or 2: 2 intra-op threads lose several-fold, NOTE [Thread budget]), PEER_PLAIN_ENVS for the
    plain loop (vescale-train's own budget only: its row measures vescale's overhead, and the best
    of two noisy candidates would overstate it); PEER_PY_ARGS, Debian's peer's arguments (AdamW's
    multi-tensor path: ~6% faster here than 1.13's default loop). An empty list: no candidates."""
    rounds: int = 3
    steps: int = 40
    one_envs: str = "OMP_NUM_THREADS=1;OMP_NUM_THREADS=2"
    two_envs: str = "OMP_NUM_THREADS=1"
    py1_envs: str = "OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1;OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=2"
    plain_envs: str = "OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=2"
    py_args: str = "--foreach"


def from_env(env):
    """PeerSettings of env; a variable set empty keeps its emptiness (no candidates, no args)."""
    d = PeerSettings()
    return PeerSettings(
        rounds=int(env.get("PEER_ROUNDS") or d.rounds), steps=int(env.get("PEER_STEPS") or d.steps),
        one_envs=env.get("PEER_1_ENVS", d.one_envs), two_envs=env.get("PEER_2_ENVS", d.two_envs),
        py1_envs=env.get("PEER_PY1_ENVS", d.py1_envs),
        plain_envs=env.get("PEER_PLAIN_ENVS", d.plain_envs),
        py_args=env.get("PEER_PY_ARGS", d.py_args))


def candidates(label, row, envs):
    """Specs (name, row, setting) of a row's candidates: `label [setting]` for each of envs'
    settings, or (label, row, '') when envs is empty."""
    if not envs:
        return [(label, row, "")]
    return [(f"{label} [{setting}]", row, setting) for setting in envs.split(";")]


def run_env(base, setting):
    """The environment of a run: base without the CLEARED variables, plus setting's VAR=value
    words."""
    env = {k: v for k, v in base.items() if k not in CLEARED}
    for word in setting.split():
        name, _, value = word.partition("=")
        env[name] = value
    return env
