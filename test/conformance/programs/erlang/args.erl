main(Args) -> [io:format("~ts~n", [A]) || A <- Args].
