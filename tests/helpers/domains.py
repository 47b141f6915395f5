"""Small sizes per domain (synthetic data parameters and model parameters) that the domains' own
tests and the CUDA smoke test share: fast on CPU, same classes as the registered models."""

# ----------------------------------------------------------------------------- graphs
GRAPHS_DATA = dict(num_nodes=240, num_classes=4, p_in=0.08, p_out=0.006, num_val=60, num_test=100)

# ----------------------------------------------------------------------------- pos_tagging
POS_EMB = {"word_dim": 32, "char_dim": 8, "char_out": 32}
#: small sizes for fast tests (same classes as the registered presets)
POS_MODELS = {
    "transformer": {**POS_EMB, "d_model": 32, "num_heads": 4, "num_layers": 2, "dim_feedforward": 64},
    "transformer_truncated": {**POS_EMB, "d_model": 32, "num_heads": 4, "num_layers": 2, "dim_feedforward": 64,
                              "window": 1},
    "bilstm": {**POS_EMB, "hidden_size": 32},
    "cnn": {**POS_EMB, "d_model": 32, "num_layers": 3},
    "mlp": {**POS_EMB, "d_model": 32},
}
POS_DATA = dict(num_train=600, num_val=100, num_test=150, batch_size=16)

# ----------------------------------------------------------------------------- translation
#: Tiny sizes for every registered model (tests only).
TRANSLATION_MODELS = {
    "transformer": dict(d_model=32, num_heads=4, enc_layers=2, dec_layers=2, dim_feedforward=64),
    "rnn_bahdanau": dict(embedding_dim=24, hidden_size=32),
    "rnn_luong_dot": dict(embedding_dim=24, hidden_size=32),
    "rnn_luong_general": dict(embedding_dim=24, hidden_size=32),
    "rnn_noattn": dict(embedding_dim=24, hidden_size=32),
    "convs2s": dict(embedding_dim=32, d_model=32, enc_layers=2, dec_layers=2),
}
TRANSLATION_DATA = dict(num_train=600, num_val=40, num_test=40, num_words=12, min_len=3, max_len=8)

# ----------------------------------------------------------------------------- speech
SPEECH_DATA = {"per_class": [12, 4, 6], "num_classes": 4, "num_phones": 3}
SPEECH_FRAMES = {**SPEECH_DATA, "min_frames": 120, "max_frames": 200, "min_gap": 3, "max_gap": 10}

# ----------------------------------------------------------------------------- vision
VISION_DATA = dict(num_train=256, num_val=64, num_test=64, batch_size=32)


# ----------------------------------------------------------------------------- one small cell, built
def build_small(task_name: str, dataset: str, model: str, cache_dir: str, *, data_params: dict,
                model_params: dict, module_params: dict | None = None):
    """``(task module around ``model`` built with ``model_params`` over its registered defaults,
    the task's synthetic ``dataset`` set up for fit with ``data_params``)``, seeded as a cell is
    (data seed 0, then ``torch.manual_seed(0)`` before the network), with the task's module
    defaults updated by ``module_params``: the one builder the sync, CUDA and FLOPs checks share."""
    import torch

    from tasks.common.registry import get_task

    task = get_task(task_name)
    dspec = task.datasets.get(dataset)
    dm = dspec.build(None, cache_dir, 0, **{**dspec.params, **data_params})
    dm.prepare_data()
    dm.setup("fit")
    torch.manual_seed(0)
    spec = task.models.get(model)
    net = spec.build(dm.info, **{**spec.params, **model_params})
    return task.make_module(net, dm.info, **{**task.module_params, **(module_params or {})}), dm
