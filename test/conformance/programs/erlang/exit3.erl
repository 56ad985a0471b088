main(_) -> halt(3).
