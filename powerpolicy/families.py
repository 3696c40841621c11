"""Hardware family of a node: the unit of fairness of the performance split."""


def family_key(gpu_count, gpu_model, cpu_model):
    """``gpu:<GPU model>`` when the node has GPUs, else ``cpu:<CPU model>``.

    The raw model strings are used as they are (no normalisation), as the
    power seed says, so two spellings of one model are two families.
    """
    if gpu_count and gpu_count > 0:
        return f"gpu:{gpu_model or ''}"
    return f"cpu:{cpu_model or ''}"
