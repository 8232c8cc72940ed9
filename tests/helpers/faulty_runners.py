"""Runner plugins written from the README (class attributes only) and plugins that misbehave: a hang, a segfault,
``os._exit``, an exception, an object array; and one that computes in fp32. Appended to the example package by
:func:`tests.helpers.plugin_dist.install_into` (``extra_source=PLUGINS, entry_points=ENTRY_POINTS``)."""

from __future__ import annotations

PLUGINS = '''
import os, signal, sys, time


class Readme(Runner):
    """Written from the README: class attributes, no __init__."""

    name = "readme"
    precisions = ("fp16",)
    rounds_low_precision = True

    def activate_impl(self):
        self._ev = ReferenceEvaluator(self.model)

    def infer_impl(self, feed):
        names = [o.name for o in self.model.graph.output]
        scale = float(self.runner_options.get("scale", 1))
        return {n: (v * scale).astype(v.dtype) for n, v in zip(names, self._ev.run(None, dict(feed)))}

    def deactivate_impl(self):
        self._ev = None


class Hang(Readme):
    def infer_impl(self, feed):
        print("hang: about to wait for a device that never answers", file=sys.stderr, flush=True)
        time.sleep(600)


class Segv(Readme):
    def infer_impl(self, feed):
        print("segv: touching freed memory", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGSEGV)


class Exit(Readme):
    def infer_impl(self, feed):
        print("exit: the driver gave up", file=sys.stderr, flush=True)
        os._exit(3)


class Raises(Readme):
    def infer_impl(self, feed):
        raise ValueError("the device said no")


class Objects(Readme):
    def infer_impl(self, feed):
        return {o.name: np.array([None, 1], dtype=object) for o in self.model.graph.output}


class Trusted(Readme):
    isolated = False


class Wide(Readme):
    """Honest about computing in fp32: its cases are recorded, never judged."""

    name = "wide"
    rounds_low_precision = False
'''
ENTRY_POINTS = "\n".join(
    f"{name} = castguard_onnxref_runner:{cls}"
    for name, cls in (
        ("readme", "Readme"),
        ("hang", "Hang"),
        ("segv", "Segv"),
        ("exit", "Exit"),
        ("raises", "Raises"),
        ("objects", "Objects"),
        ("trusted", "Trusted"),
        ("wide", "Wide"),
    )
)
