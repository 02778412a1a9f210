"""``extra:`` of a ``kind: slurm`` entry read the way ``salloc`` reads its command line
(getopt_long, Slurm 22.05), so an option the controller sets itself cannot come in under
another spelling: an unambiguous abbreviation of a long option (``--no-sh`` is
``--no-shell``, ``--job-n=x`` and ``--jo=x`` are ``--job-name``), its ``=`` and
separate-word forms, short options bundled or with their value attached (``-Jname``,
``-vN2``), and words that are the value of the option before them (``--comment --no-shell``
is a comment, not an option).

Where this table does not know an option it errs towards refusing: an unknown option is
taken to have no value, so the word after it is read as an option too."""

from __future__ import annotations

from dataclasses import dataclass

#: Long options the controller sets (``salloc --job-name=... --nodes=... sh -c HOLDER``):
#: ``--no-shell`` and ``--jobid`` would keep the holder from running or attach to another job.
OURS_LONG = ("job-name", "nodes", "no-shell", "jobid")
#: The short forms of the first two, in that order.
OURS_SHORT = "JN"



def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: salloc's long options that take a value (``required_argument``): the word after one
#: without ``=`` is its value.
_WITH_VALUE = _names("""
    account acctg-freq begin bb bbf burst-buffer-file chdir cluster-constraint clusters
    comment constraint core-spec cores-per-socket cpu-freq cpus-per-gpu cpus-per-task
    deadline delay-boot dependency distribution exclude extra-node-info gid gpu-bind
    gpu-freq gpus gpus-per-node gpus-per-socket gpus-per-task gres gres-flags job-name
    jobid licenses mail-type mail-user mcs-label mem mem-bind mem-per-cpu mem-per-gpu
    mincpus network nodefile nodelist nodes ntasks ntasks-per-core ntasks-per-gpu
    ntasks-per-node ntasks-per-socket partition power prefer priority profile qos
    reservation signal sockets-per-node switches thread-spec threads-per-core time
    time-min tmp uid wckey
""")
#: Long options whose value, if any, must come with ``=``.
_OPTIONAL_VALUE = _names("exclusive immediate kill-command nice x11")
#: Long options without a value (those known here; an unknown one is taken as one of these).
_FLAGS = _names("""
    bell container contiguous get-user-env hold no-bell no-kill no-shell overcommit
    oversubscribe quiet reboot spread-job use-min-nodes verbose help usage version
""")
_LONG = _WITH_VALUE | _OPTIONAL_VALUE | _FLAGS | frozenset(OURS_LONG)
#: Short options that take a value (attached, ``-p debug``'s next word, or ``-pdebug``).
_SHORT_WITH_VALUE = frozenset("AbBcCdDFGJLmMnNpqStwx")
#: Short options whose value, if any, is attached (``-I60``).
_SHORT_OPTIONAL = frozenset("IK")


@dataclass(frozen=True)
class Refusal:
    """An ``extra:`` word salloc would not take as the controller needs it."""

    index: int      # which word of the list
    message: str


def _long_name(word: str) -> str | None:
    """The long option getopt_long resolves ``--word`` to (exact, else the one option it
    abbreviates), or None when it is ambiguous or unknown here."""
    if word in _LONG:
        return word
    matches = [name for name in _LONG if name.startswith(word)]
    return matches[0] if len(matches) == 1 else None


def _ours(word: str, name: str) -> str:
    return (f"{word} is salloc's --{name}, which the controller sets; use the entry's own keys "
            "(nodes:, partition:, ...)")


def parse(words: list[str]) -> tuple[list[tuple[str, ...]], Refusal | None]:
    """``words`` (salloc options, one word each as exec gives them) as salloc reads them:
    each option with its separate value word, if it has one. The refusal is for the first
    word that sets what the controller sets (abbreviated or not, bundled or not), that
    salloc would not read as an option, or that holds a control character (a newline
    would end an ``#SBATCH`` line in an exported script)."""
    groups: list[tuple[str, ...]] = []
    index = 0
    while index < len(words):
        word = words[index]
        if any(ord(c) < 0x20 or ord(c) == 0x7f for c in word):
            return groups, Refusal(index, f"{word!r} holds a control character")
        if word == "--" or not word.startswith("-") or word == "-":
            return groups, Refusal(index, f"expected an salloc option such as --qos=normal, got "
                                          f"{word!r} (salloc would run it as the job's command)")
        takes_next = False
        if word.startswith("--"):
            name, has_value, _ = word[2:].partition("=")
            resolved = _long_name(name)
            if resolved in OURS_LONG:
                return groups, Refusal(index, _ours(word.split("=", 1)[0], resolved))
            # A prefix of ours that salloc calls ambiguous (``--no``) is refused too: it is
            # ours or an error either way.
            prefixed = [o for o in OURS_LONG if name and o.startswith(name)]
            if prefixed:
                return groups, Refusal(index, _ours(word.split("=", 1)[0], " or --".join(prefixed)))
            takes_next = resolved in _WITH_VALUE and not has_value
        else:
            for position, letter in enumerate(word[1:], start=1):
                if letter in OURS_SHORT:
                    long = OURS_LONG[OURS_SHORT.index(letter)]
                    return groups, Refusal(index, _ours(f"-{letter} (in {word})" if len(word) > 2
                                                        else word, long))
                if letter in _SHORT_WITH_VALUE:
                    takes_next = position == len(word) - 1
                    break
                if letter in _SHORT_OPTIONAL:
                    break
        if takes_next:
            if index + 1 == len(words):
                return groups, Refusal(index, f"{word} needs a value after it")
            value = words[index + 1]
            if any(ord(c) < 0x20 or ord(c) == 0x7f for c in value):
                return groups, Refusal(index + 1, f"{value!r} holds a control character")
            groups.append((word, value))
            index += 2
        else:
            groups.append((word,))
            index += 1
    return groups, None
