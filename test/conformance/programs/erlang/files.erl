main(_) ->
    {ok, Bin} = file:read_file("input.txt"),
    Upper = string:uppercase(unicode:characters_to_list(Bin)),
    ok = file:write_file("output.txt", unicode:characters_to_binary(Upper)).
