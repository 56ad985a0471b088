raise newException(ValueError, "boom")
