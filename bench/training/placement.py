"""Placement balance: max/mean parameter bytes per ps, for each strategy and partitioning,
at 2, 3, 4 and 8 ps, from the same graph a real run builds (no server is started).

    python -m bench.training.placement
"""

from __future__ import annotations

import sys

from bench.harness.report import table as markdown_table
from trainer import data
from trainer.cluster import Cluster
from trainer.graph import build
from trainer.settings import TrainingSettings
from trainer.tfimport import import_tf

#: At its default size, on 2 cores.
RUN_TIME = "about 1 min"

PS_COUNTS = (2, 3, 4, 8)


def table(models: tuple[str, ...] = ("cnn", "vgg19"), ps_counts: tuple[int, ...] = PS_COUNTS) -> str:
    tf = import_tf()
    rows = []
    for model in models:
        for strategy in ("round_robin", "greedy"):
            for per_ps in (False, True):
                cells = []
                for num_ps in ps_counts:
                    settings = TrainingSettings().replace(model=model, dataset="synthetic",
                                                          placement=strategy,
                                                          partitions=num_ps if per_ps else 1)
                    cluster = Cluster(tuple(f"ps{i}:1" for i in range(num_ps)), ("worker0:1",))
                    placement = build(tf, settings, cluster, 0, data.input_shape(settings)).placement
                    cells.append(f"{placement.max_mean_ratio:.2f}")
                label = f"{model}, {strategy}, partitions {'= ps' if per_ps else '1'}"
                rows.append([label, *cells])
    return markdown_table(["model, placement, partitions", *(f"{n} ps" for n in ps_counts)], rows)


def main() -> int:
    print(table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
