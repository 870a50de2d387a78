"""Tests of the transports in mrtr_sansio.adapters."""
