"""The between-graph-replication training graph, identical for ``plan`` and real runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainer import placement
from trainer.cluster import Cluster
from trainer.fuse import FusedReads
from trainer.models import MODELS, VariableMaker
from trainer.settings import Mode, Optimizer, PlacementStrategy, TrainingSettings

Tensor = Any

#: Every ps waits on its own "done" queue for one token per worker instead of
#: ``server.join()``, which never returns (tensorflow/tensorflow#4713).
DONE_QUEUE_CAPACITY = 4096


class RoundRobinStrategy:
    """TensorFlow's default ps strategy, kept as one instance so that towers and the global
    step share one counter (a fresh ``replica_device_setter`` would restart at ps 0)."""

    def __init__(self, num_ps: int):
        self._num_ps = num_ps
        self._next = 0

    def __call__(self, op: Any) -> int:
        task = self._next
        self._next = (self._next + 1) % self._num_ps
        return task


def done_queue(tf: Any, ps_index: int) -> Any:
    """The queue a ps waits on; workers enqueue their index when they finish."""
    with tf.device(f"/job:ps/task:{ps_index}"):
        return tf.FIFOQueue(DONE_QUEUE_CAPACITY, [tf.int32], shapes=[()],
                            shared_name=f"tfdist_done_ps{ps_index}", name=f"tfdist_done_ps{ps_index}")


def make_optimizer(tf: Any, settings: TrainingSettings) -> Any:
    lr = settings.learning_rate
    return {
        Optimizer.SGD: lambda: tf.train.GradientDescentOptimizer(lr),
        Optimizer.RMSPROP: lambda: tf.train.RMSPropOptimizer(lr),
        Optimizer.ADAGRAD: lambda: tf.train.AdagradOptimizer(lr),
        Optimizer.ADAM: lambda: tf.train.AdamOptimizer(lr),
    }[settings.optimizer]()


def tower_devices(worker_device: str, towers: int, use_gpu: bool) -> list[str]:
    """One device per tower: the worker's GPUs, or as many logical CPUs without GPUs."""
    if towers == 1:
        return [worker_device]
    kind = "GPU" if use_gpu else "CPU"
    return [f"{worker_device}/device:{kind}:{k}" for k in range(towers)]


@dataclass
class TrainGraph:
    """Handles on the ops a worker runs."""

    graph: Any
    global_step: Tensor
    train_op: Tensor  # its value: the global step after this step (async) or the token (sync)
    loss: Tensor
    accuracy: Tensor
    x_feed: Tensor
    y_feed: Tensor
    iterator_init: Any
    # eval_* and saver: the chief's only (None on another worker).
    eval_x: Tensor
    eval_y: Tensor
    eval_correct: Tensor
    eval_loss_sum: Tensor
    init_op: Any
    ready_op: Tensor
    local_init_op: Any
    saver: Any
    done_enqueue: list[Any]  # one op per ps
    placement: Any
    chief_sync_op: Any = None  # sync only: one round of aggregate-apply-enqueue tokens
    release_tokens: Any = None  # sync only: frees workers still waiting after the last round
    #: Fused async only: the global step after this step as read at its start plus one, a
    #: lower bound (other workers' steps during this one are not counted), fetched instead of
    #: ``train_op``'s value, which is then run as a target: one transfer from the ps fewer a
    #: step. The steps whose global step is reported fetch the value itself (``exact``).
    step_after: Tensor = None

    def fetches(self, exact: bool = False) -> list[Any]:
        """What a training step runs: the global step after it (fused async and not
        ``exact``: its lower bound, :attr:`step_after`), the loss, and what must run. (The
        increment's value is read right after it, a second op: another worker's increment in
        between can make two steps say the same number, rarely.)"""
        if self.step_after is None or exact:
            return [self.train_op, self.loss]
        return [self.step_after, self.loss, self.train_op.op]


def build(tf: Any, settings: TrainingSettings, cluster: Cluster, task_index: int,
          input_shape: tuple[int, int, int], use_gpu: bool = False) -> TrainGraph:
    """Build the graph worker ``task_index`` runs (``plan`` builds it for worker 0)."""
    num_ps, num_workers = len(cluster.ps), len(cluster.worker)
    is_chief = task_index == 0
    worker_device = f"/job:worker/task:{task_index}"
    strategy = (placement.GreedyStrategy(tf, num_ps)
                if settings.placement is PlacementStrategy.GREEDY else RoundRobinStrategy(num_ps))

    def setter(device: str) -> Any:
        return tf.train.replica_device_setter(ps_tasks=num_ps, worker_device=device,
                                              ps_strategy=strategy)

    graph = tf.Graph()
    with graph.as_default():
        tf.set_random_seed(settings.seed)
        with tf.device(setter(worker_device)):
            global_step = tf.train.get_or_create_global_step()

        with tf.device(worker_device):
            x_feed = tf.placeholder(tf.float32, [None, *input_shape], name="x_feed")
            y_feed = tf.placeholder(tf.int64, [None], name="y_feed")
            dataset = (tf.data.Dataset.from_tensor_slices((x_feed, y_feed))
                       .shuffle(10_000, seed=settings.seed + task_index)
                       .repeat()
                       .batch(settings.batch_size, drop_remainder=True)
                       .prefetch(4))
            iterator = tf.data.make_initializable_iterator(dataset)
            images, labels = iterator.get_next()

        vm = VariableMaker(tf, settings.seed, placement.make_partitioner(tf, settings.partitions))
        model_fn = MODELS[settings.model]
        optimizer = make_optimizer(tf, settings)
        devices = tower_devices(worker_device, settings.gpus, use_gpu)
        image_slices = tf.split(images, len(devices)) if len(devices) > 1 else [images]
        label_slices = tf.split(labels, len(devices)) if len(devices) > 1 else [labels]
        fused = None
        if settings.fuse:
            # The variables first, exactly as unfused (same order, so the same placement),
            # by a pass of the model whose ops are never run; then one read per ps.
            with tf.device(setter(devices[0])):
                model_fn(vm, image_slices[0], True, settings.hidden_units)
            fused = FusedReads(tf, tf.trainable_variables(), worker_device, global_step)
        tower_grads: list[Any] = []
        losses, accuracies = [], []
        for k, device in enumerate(devices):
            reuse = True if k or fused else None
            with tf.device(setter(device)), \
                    tf.variable_scope(tf.get_variable_scope(), reuse=reuse,
                                      custom_getter=fused.getter if fused else None):
                logits = model_fn(vm, image_slices[k], True, settings.hidden_units)
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                    labels=label_slices[k], logits=logits))
                correct = tf.equal(tf.argmax(logits, 1), label_slices[k])
                accuracies.append(tf.reduce_mean(tf.cast(correct, tf.float32)))
                losses.append(loss)
                tower_grads.append(fused.gradients(loss) if fused else
                                   optimizer.compute_gradients(loss))

        with tf.device(setter(worker_device)):
            if fused:
                grads_and_vars = fused.grads_and_vars(_average_flat(tf, tower_grads))
            else:
                grads_and_vars = _average(tf, tower_grads)
            mean_loss = tf.add_n(losses) / len(losses)
            mean_accuracy = tf.add_n(accuracies) / len(accuracies)
            chief_sync_op = release_tokens = step_after = None
            if settings.mode is Mode.SYNC:
                sync = tf.train.SyncReplicasOptimizer(
                    optimizer, replicas_to_aggregate=settings.effective_replicas(num_workers),
                    total_num_replicas=num_workers)
                train_op = sync.apply_gradients(grads_and_vars, global_step=global_step)
                chief_sync_op = sync.get_chief_queue_runner().enqueue_ops[0]
                # No initial tokens: every round then needs one gradient from each replica
                # and hands each of them one token, so no worker can run ahead and take a
                # slower worker's token.
                sync_local_init = sync.chief_init_op if is_chief else sync.local_step_init_op
                with tf.device(global_step.device):
                    release_tokens = sync._sync_token_queue.enqueue_many(
                        (tf.fill([num_workers], tf.identity(global_step)),))
            else:
                # Fused, the apply's constants (the learning rate, the increment) and the op
                # that groups it live on a ps: on the worker, each would be one more transfer
                # a step (and the group's control edge to the increment, two).
                with tf.device(global_step.device if fused else None):
                    apply = optimizer.apply_gradients(grads_and_vars)
                    with tf.control_dependencies([apply]):
                        # use_locking: concurrent workers must never lose an increment, so the
                        # workers' local steps add up to the global step.
                        train_op = tf.assign_add(global_step, 1, use_locking=True)
                sync_local_init = tf.no_op()
                if fused:
                    # The step after this one as the worker knows it from its read, so that
                    # the increment's value need not come back from the ps (run as a target).
                    step_after = fused.step_read + 1

            # Evaluation and checkpoints are the chief's: another worker builds neither (a
            # tenth of its start-up CPU, on the path to its first step). Built after every
            # op that draws random numbers, so leaving them out changes no seed.
            eval_x = eval_y = eval_correct = eval_loss_sum = None
            if is_chief:
                with tf.variable_scope(tf.get_variable_scope(), reuse=True):
                    eval_x = tf.placeholder(tf.float32, [None, *input_shape], name="eval_x")
                    eval_y = tf.placeholder(tf.int64, [None], name="eval_y")
                    eval_logits = model_fn(vm, eval_x, False, settings.hidden_units)
                    eval_correct = tf.reduce_sum(tf.cast(
                        tf.equal(tf.argmax(eval_logits, 1), eval_y), tf.int64))
                    eval_loss_sum = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(
                        labels=eval_y, logits=eval_logits))

        with tf.device(worker_device):
            init_op = tf.global_variables_initializer()
            ready_op = tf.report_uninitialized_variables(tf.global_variables())
            local_init_op = tf.group(tf.local_variables_initializer(), sync_local_init)
            saver = tf.train.Saver(max_to_keep=3) if is_chief else None
        done_enqueue = [done_queue(tf, j).enqueue(task_index) for j in range(num_ps)]
        report = placement.report(tf, model=settings.model.value, strategy=settings.placement.value,
                                  partitions=settings.partitions, num_ps=num_ps, index=task_index)

    return TrainGraph(
        graph=graph, global_step=global_step, train_op=train_op, loss=mean_loss,
        accuracy=mean_accuracy, x_feed=x_feed, y_feed=y_feed, iterator_init=iterator.initializer,
        eval_x=eval_x, eval_y=eval_y, eval_correct=eval_correct, eval_loss_sum=eval_loss_sum,
        init_op=init_op, ready_op=ready_op, local_init_op=local_init_op, saver=saver,
        done_enqueue=done_enqueue, placement=report, chief_sync_op=chief_sync_op,
        release_tokens=release_tokens, step_after=step_after)


def _average(tf: Any, tower_grads: list[list[tuple[Tensor, Any]]]) -> list[tuple[Tensor, Any]]:
    """Average each variable's gradient over the towers (seed 004's average_gradients)."""
    if len(tower_grads) == 1:
        return [(g, v) for g, v in tower_grads[0] if g is not None]
    averaged = []
    for pairs in zip(*tower_grads, strict=True):
        grads = [g for g, _ in pairs if g is not None]
        if grads:
            averaged.append((tf.add_n(grads) / len(grads), pairs[0][1]))
    return averaged


def _average_flat(tf: Any, tower_grads: list[list[Tensor]]) -> list[Tensor]:
    """Average each ps's packed gradient over the towers."""
    if len(tower_grads) == 1:
        return tower_grads[0]
    averaged = []
    for grads in zip(*tower_grads, strict=True):
        present = [g for g in grads if g is not None]
        averaged.append(tf.add_n(present) / len(present) if present else None)
    return averaged
