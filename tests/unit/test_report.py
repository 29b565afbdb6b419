"""The report's per-wave table, from moves rows alone (no Spark, no warehouse)."""

import pandas as pd

from jobs.report import wave_table


def test_the_wave_table_counts_partitions_and_leader_only_changes_and_says_unknown_for_unmeasured_data():
    moves = pd.DataFrame(
        {
            "wave": [2, 1, 1, 2, 3],
            "kind": ["reassign", "leader", "reassign", "leader", "leader"],
            "bytes_to_move": [2.0 * 2**30, 0.0, 512.0 * 2**20, None, 0.0],
        }
    )
    table = wave_table(moves)
    assert table.to_dict("list") == {
        "wave": [1, 2, 3],
        "partitions": ["2", "2", "1"],
        "leader only": ["1", "1", "1"],
        "data": ["512.0 MiB", "unknown", "0 B"],
    }
    assert wave_table(moves.iloc[:0]).empty
