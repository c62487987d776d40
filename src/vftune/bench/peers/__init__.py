"""The policies vftune is benchmarked against."""
