"""The safety invariants of Raft, checked over a simulated history (issue 17).

The checker knows nothing of the engine: the simulator (raft_sim.py) reports what each node
does, as plain ints and bytes, and every report is checked on arrival against everything
reported before, so a violation surfaces at the step that causes it. The self-tests in
test_raft_simulation.py feed it hand-made bad histories.

The invariants (Raft paper, figure 3, plus what an application relies on):
- election safety: at most one leader per term, across the whole history;
- log matching: two logs holding an entry with the same index and term hold the same entry
  there and agree on everything before it (checked inductively: every (index, term) has
  one payload and one predecessor term, whichever log it appears in);
- leader completeness: an entry committed in term t is in the log of every leader of a term
  after t;
- state-machine safety: no two nodes apply different entries at one index (so the applied
  sequences are prefixes of one another), and nothing is applied twice or out of order;
- durability: what a node applied before a crash is still in its storage after the
  restart, committed entries never leave a log that holds them, a persisted term never goes
  back, a persisted vote never changes within its term, a persisted commit never decreases.
"""

from __future__ import annotations

from collections.abc import Callable


class Violation(AssertionError):
    """A broken invariant (the simulator adds the seed and the replay command)."""


# What term_at answers for an index the log has compacted away (a snapshot covers it).
COMPACTED = -1
# ... and for an index past its last entry.
MISSING = -2


class Checker:
    __slots__ = (
        "applied",
        "commit_obs_term",
        "committed",
        "hard_states",
        "leader_logs",
        "leaders",
        "links",
        "proposals",
    )

    def __init__(self) -> None:
        # term -> the node that led it.
        self.leaders: dict[int, int] = {}
        # Leaders still leading: node -> (term, term_at of its log), for the completeness
        # check of entries whose commit is seen after the leader was elected.
        self.leader_logs: dict[int, tuple[int, Callable[[int], int]]] = {}
        # (index, term) -> (term at index-1, entry type, payload): log matching.
        self.links: dict[tuple[int, int], tuple[int, int, bytes]] = {}
        # committed[i]: the term of the entry committed at i (committed[0] is a dummy).
        self.committed: list[int] = [0]
        # The term in which the commit of committed[i] was first seen (at least the term
        # in which it was committed).
        self.commit_obs_term: list[int] = [0]
        # applied[i]: (term, type, payload) of the entry applied at i, by whichever node.
        self.applied: list[tuple[int, int, bytes]] = [(0, 0, b"")]
        # node -> (term, vote, commit) last persisted.
        self.hard_states: dict[int, tuple[int, int, int]] = {}
        # Payloads clients proposed (None: do not check where applied entries come from).
        self.proposals: set[bytes] | None = None

    # -- election safety and leader completeness ---------------------------------------

    def leader(self, node: int, term: int, term_at: Callable[[int], int]) -> None:
        """``node`` is leader of ``term``; term_at(i) is the term of its entry at i (or
        COMPACTED / MISSING). Call it at every step the node is leader: the first report of
        a (term, node) checks the log against all entries committed before ``term``."""
        prev = self.leaders.get(term)
        if prev is not None:
            if prev != node:
                raise Violation(f"two leaders in term {term}: {prev} and {node}")
            return
        self.leaders[term] = node
        self.leader_logs[node] = (term, term_at)
        for i in range(1, len(self.committed)):
            if self.commit_obs_term[i] < term:
                self._complete(node, term, term_at, i)

    def not_leader(self, node: int) -> None:
        self.leader_logs.pop(node, None)

    def _complete(self, node: int, term: int, term_at: Callable[[int], int], i: int) -> None:
        t = term_at(i)
        if t == COMPACTED:
            return
        if t != self.committed[i]:
            have = "nothing" if t == MISSING else f"term {t}"
            raise Violation(
                f"leader completeness: leader {node} of term {term} has {have} at index {i}, "
                f"where an entry of term {self.committed[i]} was committed "
                f"(commit seen in term {self.commit_obs_term[i]})"
            )

    # -- commitment --------------------------------------------------------------------

    def commit(self, node: int, obs_term: int, index: int, term: int) -> None:
        """``node`` (now in ``obs_term``) holds the entry (index, term) as committed."""
        n = len(self.committed)
        if index < n:
            if self.committed[index] != term:
                raise Violation(
                    f"node {node} has term {term} committed at index {index}, where term "
                    f"{self.committed[index]} was committed"
                )
            return
        if index > n:
            # The simulator reports each node's commits in order from where it knows the
            # node's log, and a snapshot only covers indexes some node applied already.
            raise Violation(f"commit of index {index} reported before index {n}")
        self.committed.append(term)
        self.commit_obs_term.append(obs_term)
        for lnode, (lterm, term_at) in self.leader_logs.items():
            if lterm > obs_term:
                self._complete(lnode, lterm, term_at, index)

    def committed_index(self) -> int:
        return len(self.committed) - 1

    # -- log matching and durability of the log ----------------------------------------

    def append(self, node: int, prev_term: int, entries: list[tuple[int, int, int, bytes]]) -> None:
        """``node`` persists entries (index, term, type, payload), consecutive, after an
        entry of term ``prev_term`` (COMPACTED when its log has no such entry)."""
        links = self.links
        for index, term, typ, data in entries:
            link = (prev_term, typ, data)
            have = links.get((index, term))
            if have is None or (have[0] == COMPACTED and have[1:] == link[1:]):
                links[(index, term)] = link
            elif have[1:] != link[1:] or (have[0] != prev_term and prev_term != COMPACTED):
                raise Violation(
                    f"log matching: node {node} has at index {index} term {term} "
                    f"(prev term {prev_term}, type {typ}, data {data!r}), another log "
                    f"(prev term {have[0]}, type {have[1]}, data {have[2]!r})"
                )
            prev_term = term

    def remove(self, node: int, index: int, term: int) -> None:
        """``node``'s storage drops (truncates or overwrites) its entry (index, term)."""
        if index < len(self.committed) and self.committed[index] == term:
            raise Violation(
                f"node {node} dropped the committed entry at index {index} (term {term})"
            )

    def hard_state(self, node: int, term: int, vote: int, commit: int) -> None:
        """``node`` persists a HardState."""
        old = self.hard_states.get(node)
        if old is not None:
            oterm, ovote, ocommit = old
            if term < oterm:
                raise Violation(f"node {node} persisted term {term} after term {oterm}")
            if term == oterm and ovote != 0 and vote != ovote:
                raise Violation(f"node {node} voted for {ovote} and then {vote} in term {term}")
            if commit < ocommit:
                raise Violation(f"node {node} persisted commit {commit} after {ocommit}")
        self.hard_states[node] = (term, vote, commit)

    # -- the state machine -------------------------------------------------------------

    def apply(self, node: int, index: int, term: int, typ: int, data: bytes) -> None:
        """``node`` applies the entry at ``index`` (its previous one was index-1)."""
        ent = (term, typ, data)
        n = len(self.applied)
        if index < n:
            if self.applied[index] != ent:
                raise Violation(
                    f"state machine safety: node {node} applies {ent} at index {index}, "
                    f"another node applied {self.applied[index]}"
                )
            return
        if index > n:
            raise Violation(f"node {node} applies index {index}; index {n} was never applied")
        if index < len(self.committed) and self.committed[index] != term:
            raise Violation(
                f"node {node} applies term {term} at index {index}, where term "
                f"{self.committed[index]} was committed"
            )
        # Normal entries only: the engine writes conf changes of its own (bootstrap, the
        # automatic leaving of a joint configuration).
        if self.proposals is not None and typ == 0 and data and data not in self.proposals:
            raise Violation(f"node {node} applies {data!r}, which no client proposed")
        self.applied.append(ent)
        if index == len(self.committed):
            # Applied means committed, even where no one was seen to commit it.
            self.committed.append(term)
            self.commit_obs_term.append(1 << 62)

    def restored(
        self, node: int, pre_crash_applied: int, first: int, term_at: Callable[[int], int]
    ) -> None:
        """After ``node``'s restart: its storage must still hold everything it applied
        before the crash (indexes first..pre_crash_applied; below ``first`` a snapshot
        covers them)."""
        for i in range(max(first, 1), pre_crash_applied + 1):
            t = term_at(i)
            if t == COMPACTED:
                continue
            if t != self.applied[i][0]:
                have = "nothing" if t == MISSING else f"term {t}"
                raise Violation(
                    f"durability: node {node} applied index {i} (term {self.applied[i][0]}) "
                    f"before its crash; after the restart its storage has {have} there"
                )
