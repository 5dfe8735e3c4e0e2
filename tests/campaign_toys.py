"""A stand-in curve subject importable by name, for the tests that train seeds in child processes (not a test file)."""
import os
from pathlib import Path

from disentbook.campaign.curves import Subject
from disentbook.campaign.lengths import LengthRule


class FileToy(Subject):
    "Its run is a step counter in a file; its metric rises to a plateau at 4,000 steps; each row says where it was measured."
    name, key = "filetoy", "score"
    grid, rule = (1000, 2000, 3000, 4000, 6000, 8000), LengthRule(min_stop=4000)
    curve_seeds, more_seeds = (0, 1, 2), (3,)
    def identity(self): return dict(name=self.name, rule=self.rule.as_dict())
    def curve_file(self, root): return Path(root) / "filetoy.json"
    def run_dir(self, root, seed): return Path(root) / f"run{seed}"
    def _f(self, root, seed): return Path(root) / f"run{seed}.txt"
    def step_of(self, root, seed): return int(self._f(root, seed).read_text()) if self._f(root, seed).is_file() else 0
    def restart(self, root, seed): self._f(root, seed).unlink()
    def train_to(self, root, seed, steps, clock, say):
        if not clock.fits(): return False
        self._f(root, seed).write_text(str(steps)); return True
    def measure(self, root, seed, steps):
        import torch
        return dict(score=0.2 * min(steps, 4000) / 4000 + 0.001 * seed, pid=os.getpid(), threads=torch.get_num_threads(),
                    subject_threads=self.threads)


class SlowToy(FileToy):
    "Each training call says it began (its process id in a file) and then takes a minute."
    name = "slowtoy"
    def curve_file(self, root): return Path(root) / "slowtoy.json"
    def train_to(self, root, seed, steps, clock, say):
        (Path(root) / f"pid{seed}").write_text(str(os.getpid()))
        import time
        time.sleep(60)
        return super().train_to(root, seed, steps, clock, say)


def run_slow(root):
    "What a killed campaign was doing: two SlowToy seeds in child processes."
    from disentbook.campaign.curves import along_seeds
    from disentbook.campaign.ledger import Clock
    along_seeds(root, SlowToy(), (0, 1), [1000], Clock(3600), workers=2)


class TimedToy(FileToy):
    """A FileToy whose rows record their training seconds (`seconds` of them per step), the threads it had and this CPU
    (so that the planning reads the rows' rate, not the one its first seed's probe timed)."""
    name, timed, seconds = "timedtoy", True, 0.01
    def curve_file(self, root): return Path(root) / "timedtoy.json"
    def measure(self, root, seed, steps):
        from disentbook.core import cpu_name
        return dict(super().measure(root, seed, steps), train_seconds=self.seconds * steps, seconds_eval=1.0, machine=cpu_name())


class SlowTimedToy(TimedToy):
    "A TimedToy whose rows say 0.5 s a step."
    name, seconds = "slowtimedtoy", 0.5
    def curve_file(self, root): return Path(root) / "slowtimedtoy.json"


class ElsewhereTimedToy(TimedToy):
    "A TimedToy whose rows say they were measured on another CPU (the rates of another machine)."
    name = "elsewheretimedtoy"
    def curve_file(self, root): return Path(root) / "elsewheretimedtoy.json"
    def measure(self, root, seed, steps): return dict(super().measure(root, seed, steps), machine="another CPU")
