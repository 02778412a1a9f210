"""The entry point, Cloud ML Engine style: ``python -m trainer.task --job-dir DIR ...``.
The cluster and this task's role come from ``TF_CONFIG``, as the platform sets it."""

import argparse
import json
import os

import tensorflow as tf

from trainer import model

tf1 = tf.compat.v1
tf1.disable_eager_execution()


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--job-dir", required=True, help="where checkpoints go")
    parser.add_argument("--train-steps", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=0.1)
    return parser.parse_args()


def main() -> None:
    args = parse()
    config = json.loads(os.environ.get("TF_CONFIG", "{}"))
    cluster = tf1.train.ClusterSpec(config["cluster"])
    task = config["task"]
    server = tf1.train.Server(cluster, job_name=task["type"], task_index=task["index"])
    if task["type"] == "ps":
        server.join()
        return
    is_chief = task["index"] == 0
    device = tf1.train.replica_device_setter(
        worker_device=f"/job:worker/task:{task['index']}", cluster=cluster)
    with tf.Graph().as_default(), tf1.device(device):
        features, labels = model.input_batch(args.batch_size, seed=task["index"])
        loss, train_op = model.build(features, labels, args.learning_rate)
        hooks = [tf1.train.StopAtStepHook(last_step=args.train_steps),
                 tf1.train.LoggingTensorHook({"loss": loss}, every_n_iter=100)]
        with tf1.train.MonitoredTrainingSession(
                master=server.target, is_chief=is_chief, checkpoint_dir=args.job_dir if is_chief else None,
                hooks=hooks, save_checkpoint_secs=None, save_summaries_steps=None,
                log_step_count_steps=None) as session:
            while not session.should_stop():
                session.run(train_op)


if __name__ == "__main__":
    main()
