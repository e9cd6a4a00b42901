"""Replay of recorded agent traces under toolbudget and the strategies of other agents."""
