<?php
// Waits for the writer turn with a SIGTERM handler that calls exit(3)
// (pcntl_async_signals on). argv: database path. Prints "waiting" first.
pcntl_async_signals( true );
pcntl_signal( SIGTERM, function () { echo "handler\n"; exit( 3 ); } );
register_shutdown_function( function () { echo "shutdown\n"; } );
$db = new SQLite3( $argv[1] );
$queue = new WriterLock\Queue( $argv[1] );
echo "waiting\n";
fflush( STDOUT );
$queue->begin( $db, 20 );
echo "began\n";
