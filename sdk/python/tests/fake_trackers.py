"""Stand-ins for the mlflow and wandb packages at their module boundary: the calls the SDK makes
(mlflow.start_run, mlflow.log_params, wandb.init) recorded, with the objects they return shaped as
the real ones (ActiveRun.info.run_id and .experiment_id, Run.url). Installed in sys.modules for one
test."""

import sys
import types


class FakeMlflow(types.ModuleType):
    def __init__(self, new_run_id="3b9d0c1e", experiment_id="7", fail=None):
        super().__init__("mlflow")
        self.calls = []
        self.new_run_id = new_run_id
        self.experiment_id = experiment_id
        self.fail = fail

    def start_run(self, run_id=None, **kwargs):
        self.calls.append(("start_run", run_id))
        if self.fail is not None:
            raise self.fail
        info = types.SimpleNamespace(run_id=run_id or self.new_run_id, experiment_id=self.experiment_id)
        return types.SimpleNamespace(info=info)

    def log_params(self, params):
        self.calls.append(("log_params", dict(params)))


class FakeWandb(types.ModuleType):
    def __init__(self, entity="team"):
        super().__init__("wandb")
        self.calls = []
        self.entity = entity

    def init(self, **kwargs):
        self.calls.append(("init", kwargs))
        return types.SimpleNamespace(id=kwargs.get("id"), url="https://wandb.ai/%s/%s/runs/%s" % (
            self.entity, kwargs.get("project"), kwargs.get("id")))


def install(test, **modules):
    """Puts modules (name=module, or name=None for "not installed") into sys.modules for the rest
    of test."""
    saved = {name: sys.modules.get(name) for name in modules}

    def restore():
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module

    test.addCleanup(restore)
    sys.modules.update(modules)
