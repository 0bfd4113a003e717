"""Job names: which are valid (one rule for every backend and the spec: an Azure ML run id, the pattern
spec.schema declares), and generated ones, made the way Azure ML makes them: adjective_noun_<10 random
[a-z0-9]>."""
from __future__ import annotations

import re
import secrets
import string

from ..spec.schema import JOB_NAME_HINT, JOB_NAME_PATTERN

__all__ = ["JOB_NAME_HINT", "JOB_NAME_PATTERN", "MAX_NAME", "check_job_name", "generate_name", "valid_job_name"]

_JOB_NAME = re.compile(JOB_NAME_PATTERN)
MAX_NAME = 255        # the longest name JOB_NAME_PATTERN allows

_ADJ = ("amiable", "bold", "brave", "busy", "calm", "clever", "cool", "crisp", "eager", "epic", "frank",
        "gentle", "great", "happy", "helpful", "honest", "jolly", "keen", "kind", "lively", "loyal", "lucid",
        "mighty", "modest", "neat", "nice", "patient", "plucky", "polite", "proud", "quiet", "quirky",
        "shy", "silly", "sincere", "stoic", "sunny", "sweet", "tender", "tidy", "upbeat", "witty", "zen")
_NOUN = ("apple", "arch", "bear", "bird", "boat", "brush", "cactus", "camel", "car", "cat", "cheetah",
         "coconut", "corn", "cup", "date", "dog", "drain", "fig", "fish", "garden", "grape", "hamster",
         "kettle", "kitten", "leek", "lemon", "lime", "lion", "mango", "monkey", "napkin", "nail", "oil",
         "onion", "owl", "pear", "pencil", "pin", "plum", "rabbit", "river", "salt", "seal", "soca",
         "spoon", "tail", "tomato", "tongue", "train", "truck", "vase", "yacht", "yak", "zebra")
_ALNUM = string.ascii_lowercase + string.digits


def generate_name() -> str:
    suffix = "".join(secrets.choice(_ALNUM) for _ in range(10))
    return f"{secrets.choice(_ADJ)}_{secrets.choice(_NOUN)}_{suffix}"


def valid_job_name(name: str | None) -> bool:
    """Whether `name` is a valid job name (also the rule for datastore names, the same REST pattern)."""
    return name is not None and _JOB_NAME.fullmatch(name) is not None


def check_job_name(name: str | None, flag: str = "--name") -> str | None:
    """A name given on the command line, refused (exit 2) unless it is a valid job name."""
    if name is not None and not valid_job_name(name):
        from ..errors import UsageError

        raise UsageError(f"{flag} '{name}' is not a valid job name", hint=JOB_NAME_HINT)
    return name
