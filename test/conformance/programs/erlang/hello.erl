main(_) -> io:format("Hello, World!~n").
