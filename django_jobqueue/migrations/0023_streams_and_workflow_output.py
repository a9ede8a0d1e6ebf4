"""Issue 35: job streams (``StreamItem``, one row per item a job writes with
``ctx.stream.write``) and a workflow's declared output step (``Workflow.output``, the
step whose result ``WorkflowHandle.result`` returns)."""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('django_jobqueue', '0022_step_records'),
    ]

    operations = [
        migrations.AddField(
            model_name='workflow',
            name='output',
            field=models.CharField(blank=True, default='', max_length=200),
        ),
        migrations.CreateModel(
            name='StreamItem',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('offset', models.PositiveIntegerField(db_column='item_offset')),
                ('value', models.JSONField()),
                ('size', models.PositiveIntegerField()),
                ('run', models.PositiveIntegerField()),
                ('step', models.CharField(blank=True, default='', max_length=200)),
                ('write_no', models.PositiveIntegerField(blank=True, null=True)),
                ('written_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('job', models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='stream_items', to='django_jobqueue.job')),
            ],
            options={
                'verbose_name': 'stream item',
                'constraints': [models.UniqueConstraint(fields=('job', 'offset'), name='jobqueue_stream_offset'), models.UniqueConstraint(fields=('job', 'write_no'), name='jobqueue_stream_write')],
            },
        ),
    ]
