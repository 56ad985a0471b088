main(_) ->
    ok = io:setopts(standard_io, [binary, {encoding, latin1}]),
    copy().
copy() ->
    case io:get_chars(standard_io, "", 65536) of
        eof -> ok;
        Data -> ok = io:put_chars(standard_io, Data), copy()
    end.
