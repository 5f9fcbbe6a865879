<?php /* #?ini charset="utf-8"?

# The writerlock extension: Exponential's SQLite driver with the write queue
# of writerlock.so. Active with ActiveExtensions[]=writerlock (and the
# autoloads regenerated: php bin/php/ezpgenerateautoloads.php --extension).

[DatabaseSettings]
# DatabaseImplementation=sqlite3 (your site's setting) then loads the queued driver.
ImplementationAlias[sqlite3]=eZSQLite3QueuedDB

# The waits, with their defaults (set them in settings/override/site.ini.append.php):
# SQLiteTransactionWait=25        seconds; below 1 raised to 1; keep it below max_execution_time
#                                 and the web server's request timeout
# SQLiteCLITransactionWait=300    seconds, on the command line
# SQLiteBusyTimeout=5000          milliseconds, single statements
# SQLiteCLIBusyTimeout=30000      milliseconds, on the command line

*/ ?>
