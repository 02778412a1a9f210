"""Worker tasks' TensorFlow servers, each bound to a port of its own while the cluster (and
so every ps) names the task by another address: the test decides when that address answers
(tests/trainer/test_loop_refused.py puts a forwarder there).

Run as ``python worker_servers.py SPEC PORTS``: SPEC the cluster as JSON, PORTS the port each
worker task binds. Prints ``ready`` once every server listens; exits when stdin closes."""

from __future__ import annotations

import json
import os
import sys


def main() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    tf1 = tf.compat.v1
    spec, ports = json.loads(sys.argv[1]), json.loads(sys.argv[2])
    cluster = tf1.train.ClusterSpec(spec).as_cluster_def()
    servers = [tf1.train.Server(tf1.train.ServerDef(cluster=cluster, job_name="worker", task_index=index,
                                                    protocol="grpc", port=port), start=True)
               for index, port in enumerate(ports)]
    print("ready", flush=True)
    sys.stdin.read()
    del servers


if __name__ == "__main__":
    main()
