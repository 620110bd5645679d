"""Fakes of outside services that tests talk to over real connections."""
