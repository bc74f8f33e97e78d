"""A fault campaign: real workers, real faults, and a checker that reads what really happened.

``python -m bench faults [--smoke|--quick] [--only NAME,...]`` runs each fault of
:mod:`.plan` in a process of its own and writes docs/faults.md. Not part of the
default ``python -m bench`` run.

Modules, one job each:

- :mod:`.plan`: the faults (nemesis, broker, body lengths, what the library promises) and run sizes;
- :mod:`.app`: the workload's Celery app: three ``LockedTask`` tasks whose bodies make fenced writes;
- :mod:`.latest`: the latest-wins rows' tasks (``on_locked="replace"``, ``lock_debounce``);
- :mod:`.publisher`: the latest-wins rows' publisher processes, which a nemesis SIGKILLs;
- :mod:`.downstream`: the downstream store's fenced write (a Lua script);
- :mod:`.history`: the history store: what was published, every body's interval and writes, signals;
- :mod:`.topology`: the run's redis-servers (infrastructure, lock store or quorum) and workers;
- :mod:`.nemeses`: the faults themselves, each a loop in a thread;
- :mod:`.leftovers`: result states, messages left in the broker, locks left, worker tracebacks;
- :mod:`.answers`: every result the result backend stored, overwritten ones included;
- :mod:`.checker`: overlaps, fenced writes, fencing tokens, every message's fate;
- :mod:`.latest_checker`: superseded calls that ran, wrong answers, each key's newest call lost, stale runs;
- :mod:`.one`: one run, start to judgement (``python -m bench.faults.one``);
- :mod:`.report`: docs/faults.md;
- :mod:`.runner`: the command line and the campaign;
- :mod:`.probe`: where a message goes that Redis hands to a just-killed `BRPOP` consumer.
"""
