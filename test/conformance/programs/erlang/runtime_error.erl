main(_) -> 1 = list_to_integer("2").
